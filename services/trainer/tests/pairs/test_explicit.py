"""Pairs from explicit ratings: every rated action or trace against every oppositely rated one."""

from __future__ import annotations

from stash_common.rendering import render_example, render_trace
from stash_trainer.pairs.explicit import explicit_pairs, human_rated_step_ids, step_pairs, trace_pairs
from stash_trainer.pairs.inputs import Annotation

CALLS = (
    ("user", "Where is order 1182?"),
    ("call", "lookup_order", {"order_id": "1182"}),
    ("tool", "lookup_order", '{"status": "shipped"}'),
    ("call", "lookup_order", {"order_id": "1182"}),
    ("tool", "lookup_order", '{"status": "shipped"}'),
    ("assistant", "It shipped yesterday."),
)


def test_step_pairs_pair_every_positive_action_with_every_negative_one(make_trace, support_specs) -> None:
    trace = make_trace("t1", support_specs, ratings={2: 1, 4: -1, 6: 1})

    pairs = step_pairs([trace])

    assert [(p.chosen, p.rejected) for p in pairs] == [
        (render_example(trace.steps, 2), render_example(trace.steps, 4)),
        (render_example(trace.steps, 6), render_example(trace.steps, 4)),
    ]
    assert [p.action_type for p in pairs] == ["mixed", "response"]
    assert {p.granularity for p in pairs} == {"action"}
    assert pairs[1].evidence == {
        "source": "explicit",
        "chosen_trace_id": "t1",
        "chosen_step_id": "t1:6",
        "rejected_trace_id": "t1",
        "rejected_step_id": "t1:4",
        "chosen_authors": ["henry"],
        "rejected_authors": ["henry"],
    }


def test_step_pairs_span_traces_with_sorted_distinct_trace_ids(make_trace) -> None:
    good = make_trace("zz", CALLS, ratings={5: 1})
    bad = make_trace("aa", CALLS, ratings={3: -1})

    (pair,) = step_pairs([good, bad])

    assert pair.trace_ids == ("aa", "zz")
    assert pair.chosen == render_example(good.steps, 5)
    assert pair.rejected == render_example(bad.steps, 3)


def test_step_pairs_of_two_tool_calls_are_tool_call_pairs(make_trace) -> None:
    (pair,) = step_pairs([make_trace("t1", CALLS, ratings={1: 1, 3: -1})])

    assert pair.action_type == "tool_call"
    assert pair.trace_ids == ("t1",)


def test_trace_pairs_compare_whole_traces(make_trace, support_specs) -> None:
    good = make_trace("t2", support_specs, ratings={None: 1})
    bad = make_trace("t1", CALLS, ratings={None: -1})
    unrated = make_trace("t3", CALLS)

    (pair,) = trace_pairs([good, bad, unrated])

    assert (pair.chosen, pair.rejected) == (render_trace(good.steps), render_trace(bad.steps))
    assert (pair.granularity, pair.action_type, pair.trace_ids) == ("trace", None, ("t1", "t2"))
    assert "support agent" not in pair.chosen


def test_label_error_ratings_are_excluded(make_trace, support_specs) -> None:
    flagged = Annotation("a9", "t1:6", 1, "great", True, "henry")
    trace = make_trace("t1", support_specs, ratings={4: -1}, annotations=[flagged])

    assert explicit_pairs([trace]) == []
    assert human_rated_step_ids(trace) == frozenset({"t1:4"})


def test_reviewers_ratings_train_and_the_evidence_names_who_rated_each_side(make_trace, support_specs) -> None:
    """The owner's model trains on every non-flagged rating of its traces, whoever wrote it."""
    reviewer = Annotation("r1", "t1:2", 1, None, False, "rita-id", author_name="rita")
    flagged = Annotation("r2", "t1:6", -1, None, True, "rita-id", author_name="rita")
    trace = make_trace("t1", support_specs, ratings={4: -1}, annotations=[reviewer, flagged])

    (pair,) = step_pairs([trace])

    assert (pair.chosen, pair.rejected) == (render_example(trace.steps, 2), render_example(trace.steps, 4))
    assert (pair.evidence["chosen_authors"], pair.evidence["rejected_authors"]) == (["rita"], ["henry"])
    assert pair.to_job_line()["chosen_authors"] == ["rita"]


def test_ratings_on_steps_that_are_not_actions_are_ignored(make_trace, support_specs) -> None:
    trace = make_trace("t1", support_specs, ratings={0: 1, 1: 1, 3: 1, 5: -1, 4: -1})

    assert explicit_pairs([trace]) == []


def test_opposite_ratings_of_one_step_cancel_out(make_trace, support_specs) -> None:
    trace = make_trace("t1", support_specs, ratings={4: [1, -1], 6: [1, 1, -1], 2: -1})

    (pair,) = step_pairs([trace])

    assert (pair.chosen, pair.rejected) == (render_example(trace.steps, 6), render_example(trace.steps, 2))
    assert "t1:4" in human_rated_step_ids(trace)


def test_explicit_pairs_list_step_pairs_before_trace_pairs(make_trace, support_specs) -> None:
    first = make_trace("t1", support_specs, ratings={None: -1, 4: -1, 6: 1})
    second = make_trace("t2", CALLS, ratings={None: 1})

    pairs = explicit_pairs([first, second])

    assert [p.granularity for p in pairs] == ["action", "trace"]
