"""The combined dataset: tiers, deduplication, the max_pairs cap, the JSONL shapes and the trainability check."""

from __future__ import annotations

import json

import openai
import pytest
from fakes.llm_server import FakeLLM

from stash_common.errors import FailedPrecondition, InvalidArgument
from stash_common.rendering import render_example
from stash_trainer.pairs.dataset import (
    NotEnoughPairs,
    NotEnoughTraces,
    PairSet,
    build_pairs,
    cap_pairs,
    check_trainable,
    dedupe_pairs,
)
from stash_trainer.pairs.feedback import FeedbackExtractor
from stash_trainer.pairs.preference import PreferencePair

AUTOMATIC = {"input_version": 3, "annotation_source": "automatic"}
CALLS = (
    ("user", "Where is order 1182?"),
    ("call", "lookup_order", {"order_id": "1182"}),
    ("tool", "lookup_order", '{"status": "shipped"}'),
    ("assistant", "It shipped yesterday."),
)


def _support(support_specs: tuple, order: str) -> tuple:
    """The support conversation about another order, so that its renderings differ."""
    return tuple(
        tuple(part.replace("1182", order) if isinstance(part, str) else part for part in spec) for spec in support_specs
    )


def _pair(number: int, trace_id: str = "t1") -> PreferencePair:
    return PreferencePair(f"good {number}", f"bad {number}", (trace_id,), "action", "response")


def _extractor(fake_llm: FakeLLM) -> FeedbackExtractor:
    client = openai.OpenAI(api_key="test-key", base_url=fake_llm.url + "/v1", max_retries=0)
    return FeedbackExtractor(client, "judge-model")


def _positive_with_weaker_alternative(_path: str, body: dict) -> str:
    if body["response_format"]["json_schema"]["name"] == "feedback_judgment":
        answer = {"label": "positive", "confidence": "high", "source": "ai_judgment"}
        return json.dumps({**answer, "evidence_quote": None, "reason": "Good.", "alternative": "Maybe later."})
    prompt = body["messages"][-1]["content"]
    return json.dumps(
        {
            "preferred": "B" if "Candidate A:\nAssistant: Maybe later." in prompt else "A",
            "supported": True,
            "reason": "r",
        }
    )


def test_build_pairs_combines_explicit_and_automatic_pairs_explicit_first(make_trace, support_specs) -> None:
    rated = make_trace("t1", support_specs, ratings={4: -1, 6: 1})
    scored = make_trace("t2", _support(support_specs, "2000"), credits={2: 0.0, 4: -1.0, 6: 1.0})

    dataset = build_pairs([rated, scored], AUTOMATIC)

    assert [pair.evidence["source"] for pair in dataset.pairs] == ["explicit"] + ["automatic"] * 3
    assert dataset.feedback is None
    # Input version 3 pairs carry its section marks; what leaves the trainer is the plain text.
    assert dataset.pairs[0].chosen == render_example(rated.steps, 6, sections=True)
    assert json.loads(dataset.to_export_jsonl().splitlines()[0])["chosen"] == render_example(rated.steps, 6)


def test_build_pairs_without_training_config_uses_no_automatic_credit(make_trace, support_specs) -> None:
    scored = make_trace("t2", support_specs, credits={2: 0.0, 4: -1.0, 6: 1.0})

    assert build_pairs([scored], None).pairs == ()


def test_build_pairs_rejects_an_unsupported_training_config(make_trace, support_specs) -> None:
    with pytest.raises(InvalidArgument, match="^training_config.input_version: "):
        build_pairs([make_trace("t1", support_specs)], {"input_version": 2, "annotation_source": "automatic"})


def test_build_pairs_rejects_max_pairs_below_two(make_trace, support_specs) -> None:
    with pytest.raises(InvalidArgument, match="^max_pairs: is 1; training needs at least 2 pairs"):
        build_pairs([make_trace("t1", support_specs)], None, max_pairs=1)


def test_identical_pairs_are_deduplicated_keeping_the_first(make_trace, support_specs) -> None:
    rated = make_trace("t1", support_specs, ratings={4: -1, 6: 1})
    scored = make_trace("t2", support_specs, credits={4: -1.0, 6: 1.0})

    dataset = build_pairs([rated, scored], AUTOMATIC)

    assert [pair.evidence["source"] for pair in dataset.pairs] == ["explicit"]
    assert dataset.excluded_duplicates == 1


def test_dedupe_pairs_keeps_the_first_copy_across_tiers() -> None:
    tiers, identical, duplicates = dedupe_pairs([[_pair(1), _pair(2)], [_pair(1), _pair(3), _pair(2)]])

    assert tiers == [[_pair(1), _pair(2)], [_pair(3)]]
    assert (identical, duplicates) == (0, 2)


def test_pairs_with_identical_sides_are_dropped(make_trace) -> None:
    same_text = [make_trace(trace_id, CALLS, ratings={3: rating}) for trace_id, rating in (("t1", 1), ("t2", -1))]

    dataset = build_pairs(same_text, None)

    assert dataset.pairs == ()
    assert dataset.excluded_identical == 1


def test_cap_keeps_whole_tiers_first_then_samples_the_overflowing_tier() -> None:
    explicit = [_pair(number) for number in range(3)]
    automatic = [_pair(number) for number in range(10, 20)]

    kept = cap_pairs([explicit, automatic], 6, seed=1)

    assert kept[:3] == explicit
    assert len(kept) == 6 and all(pair in automatic for pair in kept[3:])
    assert kept[3:] == sorted(kept[3:], key=automatic.index)
    assert cap_pairs([explicit, automatic], 6, seed=1) == kept
    capped = cap_pairs([explicit, automatic], 2, seed=1)
    assert len(capped) == 2 and all(pair in explicit for pair in capped)
    assert capped == sorted(capped, key=explicit.index)


def test_build_pairs_caps_to_max_pairs_with_explicit_pairs_first(make_trace, support_specs) -> None:
    rated = make_trace("t1", support_specs, ratings={4: -1, 6: 1})
    credits = {2: 1.0, 4: -1.0, 6: 0.0}
    scored = [make_trace(f"s{n}", _support(support_specs, f"{n}000"), credits=credits) for n in range(3)]

    dataset = build_pairs([rated, *scored], AUTOMATIC, max_pairs=4, seed=5)

    assert len(dataset.pairs) == 4
    assert dataset.pairs[0].evidence["source"] == "explicit"
    assert dataset.excluded_over_max == 6
    assert build_pairs([rated, *scored], AUTOMATIC, max_pairs=4, seed=5) == dataset


def test_to_jsonl_writes_the_job_directory_shape(make_trace, support_specs) -> None:
    scored = make_trace("t2", support_specs, credits={4: -0.5, 6: 0.5})

    (line,) = build_pairs([scored], AUTOMATIC).to_jsonl().splitlines()

    assert json.loads(line) == {
        "chosen": render_example(scored.steps, 6, sections=True),
        "rejected": render_example(scored.steps, 4, sections=True),
        "trace_ids": ["t2"],
        "granularity": "action",
        "action_type": "response",
        "source": "automatic",
        "chosen_step_id": "t2:6",
        "rejected_step_id": "t2:4",
        "chosen_credit": 0.5,
        "rejected_credit": -0.5,
        "credit_method": "probability_weighted_v1",
    }


def test_to_export_jsonl_writes_the_export_shape(make_trace) -> None:
    good = make_trace("t2", CALLS, ratings={None: 1})
    bad = make_trace("t1", CALLS[:2], ratings={None: -1})

    (line,) = build_pairs([good, bad], None).to_export_jsonl().splitlines()

    assert json.loads(line) == {
        "chosen": 'User: Where is order 1182?\n\nAssistant called lookup_order({"order_id": "1182"})\n\n'
        'Tool lookup_order returned: {"status": "shipped"}\n\nAssistant: It shipped yesterday.',
        "rejected": 'User: Where is order 1182?\n\nAssistant called lookup_order({"order_id": "1182"})',
        "trace_ids": ["t1", "t2"],
        "granularity": "trace",
        "action_type": None,
    }


def test_check_trainable_without_pairs_says_what_to_do() -> None:
    with pytest.raises(NotEnoughPairs, match="^found no preference pairs in the selected traces; rate at least"):
        check_trainable([])


def test_check_trainable_with_one_pair_says_what_to_do() -> None:
    with pytest.raises(NotEnoughPairs) as caught:
        check_trainable([_pair(1)])

    assert caught.value.message == (
        "found 1 preference pair in 1 trace; rate at least one more action (+/−) or select traces with user reactions"
    )
    assert isinstance(caught.value, FailedPrecondition)


def test_check_trainable_needs_two_source_traces() -> None:
    with pytest.raises(NotEnoughTraces, match="at least two source traces are needed so evaluation can hold out whole"):
        check_trainable([_pair(1), _pair(2)])

    check_trainable([_pair(1), _pair(2, "t2")])


def test_feedback_report_marks_findings_included_in_a_trainable_dataset(
    fake_llm: FakeLLM, make_trace, support_specs
) -> None:
    fake_llm.reply = _positive_with_weaker_alternative
    traces = [
        make_trace("t1", support_specs, ratings={4: -1, 6: 1}),
        make_trace("t2", _support(support_specs, "2000")),
        make_trace("t3", _support(support_specs, "3000")),
    ]

    dataset = build_pairs(traces, None, max_pairs=3, feedback_extractor=_extractor(fake_llm))

    assert [pair.evidence["source"] for pair in dataset.pairs] == ["explicit", "ai_judgment", "ai_judgment"]
    assert [(item["trace_id"], item["step_index"], item["included_in_training"]) for item in dataset.feedback] == [
        ("t1", 2, False),
        ("t2", 2, False),
        ("t2", 4, True),
        ("t2", 6, True),
    ]
    assert (
        dataset.feedback[1]["pair_exclusion"]
        == "the alternative is not a JSON {tool_name, tool_input, content} tool call"
    )


def test_api_supplied_criteria_and_an_action_limit_shape_what_ai_preference_generation_assesses(
    fake_llm: FakeLLM, make_trace, support_specs
) -> None:
    fake_llm.reply = _positive_with_weaker_alternative
    traces = [make_trace("t1", support_specs), make_trace("t2", _support(support_specs, "2000"))]
    criteria = ["quotes the refund policy", "names the order", "asks before refunding"]
    config = {
        "input_version": 3,
        "annotation_source": "automatic",
        "criteria": criteria,
        "max_actions_per_trace": 2,
        "action_sample_seed": 11,
    }

    dataset = build_pairs(traces, config, feedback_extractor=_extractor(fake_llm))

    assert dataset.feedback is not None
    assert [item["trace_id"] for item in dataset.feedback] == ["t1", "t1", "t2", "t2"]  # 2 of 3 actions each
    judged = [
        body for _, body in fake_llm.requests if body["response_format"]["json_schema"]["name"] == "feedback_judgment"
    ]
    assert len(judged) == 4
    for item in dataset.feedback:  # 50 % rubric dropout keeps two of the three supplied criteria
        assert len(item["criteria"]) == 2 and set(item["criteria"]) <= set(criteria)
        assert item["reason"].startswith(f"Criteria: {', '.join(item['criteria'])}.")
    again = build_pairs(traces, config, feedback_extractor=_extractor(fake_llm))
    assert [(i["trace_id"], i["step_index"]) for i in again.feedback or []] == [
        (i["trace_id"], i["step_index"]) for i in dataset.feedback
    ]


def test_feedback_report_says_which_findings_the_max_pairs_cap_left_out(
    fake_llm: FakeLLM, make_trace, support_specs
) -> None:
    fake_llm.reply = _positive_with_weaker_alternative
    traces = [
        make_trace("t1", support_specs, ratings={4: -1, 6: 1}),
        make_trace("t2", _support(support_specs, "2000")),
        make_trace("t3", _support(support_specs, "3000")),
    ]

    dataset = build_pairs(traces, None, max_pairs=2, feedback_extractor=_extractor(fake_llm))

    # One explicit pair leaves room for one AI pair; trace t2 brings two, so the cap samples one of them.
    assert [pair.evidence["source"] for pair in dataset.pairs] == ["explicit", "ai_judgment"]
    paired = [item for item in dataset.feedback if item["step_index"] in (4, 6)]
    assert sorted(item["included_in_training"] for item in paired) == [False, True]
    assert [item["pair_exclusion"] for item in paired if not item["included_in_training"]] == [
        "left out of the dataset: it was capped at max_pairs"
    ]
    assert all(item["pair_exclusion"] is None for item in dataset.feedback if item["included_in_training"])


def test_feedback_report_marks_nothing_included_when_the_dataset_is_too_small(fake_llm: FakeLLM, make_trace) -> None:
    fake_llm.reply = _positive_with_weaker_alternative

    dataset = build_pairs(
        [make_trace("t1", CALLS[:1] + (("assistant", "Hi"),))], None, feedback_extractor=_extractor(fake_llm)
    )

    assert len(dataset.pairs) == 1
    assert [item["included_in_training"] for item in dataset.feedback] == [False]
    assert dataset.feedback[0]["pair_exclusion"] == (
        "the dataset is too small to train on: found 1 preference pair in 1 trace; rate at least one more action"
        " (+/−) or select traces with user reactions"
    )
    with pytest.raises(NotEnoughPairs, match="^found 1 preference pair in 1 trace"):
        check_trainable(dataset.pairs)


def test_feedback_extraction_stops_once_explicit_pairs_fill_max_pairs(
    fake_llm: FakeLLM, make_trace, support_specs
) -> None:
    fake_llm.reply = _positive_with_weaker_alternative
    traces = [make_trace("t1", support_specs, ratings={2: 1, 4: -1, 6: -1})]

    dataset = build_pairs(traces, None, max_pairs=2, feedback_extractor=_extractor(fake_llm))

    assert dataset.feedback == ()
    assert fake_llm.requests == []
    assert isinstance(dataset, PairSet) and len(dataset.pairs) == 2
