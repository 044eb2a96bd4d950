"""Golden tests of the fixed scoring rules; every expected number is worked out by hand from the spec."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stash_labeler.label_schema import StepLabel
from stash_labeler.scoring.rule_scores import Outcome, Term, open_chunks, score

CREDIT_LABELS = ("strongly_negative", "negative", "neutral", "positive", "strongly_positive")


def _user(chunk_id: str, task: str = "t0", intent: str = "request") -> StepLabel:
    return StepLabel(chunk_id=chunk_id, task_id=task, actor="user", intent=intent, verdict="none", sentiment="neutral")


def _react(chunk_id: str, target: str, verdict: str, task: str = "t0") -> StepLabel:
    return StepLabel(
        chunk_id=chunk_id,
        task_id=task,
        actor="user",
        intent="feedback",
        verdict=verdict,
        verdict_target=target,
        sentiment="negative" if verdict == "rejected" else "positive",
    )


def _work(
    chunk_id: str, kind: str = "lookup", task: str = "t0", result: str = "ok", repeat_of: str | None = None
) -> StepLabel:
    calls = kind in ("lookup", "change")
    return StepLabel(
        chunk_id=chunk_id,
        task_id=task,
        actor="agent",
        type=kind,
        effect={"lookup": "read", "change": "write"}.get(kind, "none"),
        result=result if calls else "none" if result == "ok" else result,
        duplicate_of=repeat_of,
        is_output=kind == "question",
        outcome="none",
        stance="none",
        coverage="none",
    )


def _answer(chunk_id: str, task: str = "t0", stance: str = "confident", outcome: str = "done") -> StepLabel:
    return StepLabel(
        chunk_id=chunk_id,
        task_id=task,
        actor="agent",
        type="answer",
        effect="none",
        result="none",
        is_output=True,
        outcome=outcome,
        stance=stance,
        coverage="complete",
    )


def _refund(verdict: str = "accepted", stance: str = "confident", calls: int = 1) -> list[StepLabel]:
    """A request, `calls` lookups, an answer (chunk `a`) and the user's reaction to it."""
    labels = [_user("c0"), *[_work(f"w{i}") for i in range(calls)], _answer("a", stance=stance)]
    return [*labels, _react("r", "a", verdict)]


# Work costs


@pytest.mark.parametrize(
    ("kind", "points"), [("lookup", -0.03), ("change", -0.05), ("question", -0.05), ("message", 0.0)]
)
def test_work_costs_points_by_kind(kind: str, points: float) -> None:
    chunk = score([_user("c0"), _work("c1", kind)]).chunks["c1"]

    assert chunk.points == pytest.approx(points)
    assert chunk.passed_back == 0.0


def test_error_adds_to_the_work_cost() -> None:
    chunk = score([_work("c1", "change", result="error")]).chunks["c1"]

    assert chunk.points == pytest.approx(-0.05 - 0.10)
    assert chunk.terms == [Term("change", -0.05), Term("error", -0.10)]


def test_repeat_adds_to_the_work_cost() -> None:
    chunk = score([_work("c1"), _work("c2", repeat_of="c1")]).chunks["c2"]

    assert chunk.points == pytest.approx(-0.03 - 0.10)
    assert chunk.terms == [Term("lookup", -0.03), Term("repeat of c1", -0.10)]


def test_error_and_repeat_both_add_to_the_work_cost() -> None:
    chunk = score([_work("c1"), _work("c2", result="error", repeat_of="c1")]).chunks["c2"]

    assert chunk.points == pytest.approx(-0.03 - 0.10 - 0.10)


@pytest.mark.parametrize("result", ["not_found", "empty", "none"])
def test_work_cost_has_no_extra_for_other_results(result: str) -> None:
    assert score([_work("c1", result=result)]).chunks["c1"].points == pytest.approx(-0.03)


def test_narration_costs_nothing_but_pays_the_error_extra() -> None:
    chunks = score([_work("c1", "message"), _work("c2", "message", result="error")]).chunks

    assert chunks["c1"].points == 0.0
    assert chunks["c1"].terms == []
    assert chunks["c2"].points == pytest.approx(-0.10)


# Answer points


@pytest.mark.parametrize(
    ("verdict", "stance", "points"),
    [
        ("accepted", "confident", 1.0),
        ("accepted", "hedged", 0.8),
        ("accepted", "none", 0.8),
        ("partially_accepted", "confident", 0.4),
        ("partially_accepted", "hedged", 0.3),
        ("partially_accepted", "none", 0.3),
        ("rejected", "hedged", -0.6),
        ("rejected", "none", -0.6),
        ("rejected", "confident", -1.0),
    ],
)
def test_answer_points_follow_the_reaction(verdict: str, stance: str, points: float) -> None:
    chunk = score(_refund(verdict, stance)).chunks["a"]

    assert chunk.points == pytest.approx(points)
    assert chunk.terms == [Term(f"answer {verdict} ({stance})", points)]


@pytest.mark.parametrize(("outcome", "points"), [("done", 0.2), ("partial", 0.1), ("none", 0.0), ("failed", -0.3)])
def test_unconfirmed_answer_points_follow_its_claim(outcome: str, points: float) -> None:
    chunk = score([_user("c0"), _answer("a", outcome=outcome)]).chunks["a"]

    assert chunk.points == pytest.approx(points)
    assert chunk.terms == [Term(f"answer unconfirmed, claims {outcome}", points)]


def test_reply_without_verdict_leaves_answer_unconfirmed() -> None:
    labels = [_user("c0"), _answer("a"), _user("c2", intent="follow_up")]

    assert score(labels).chunks["a"].points == pytest.approx(0.2)


def test_first_reaction_to_an_answer_counts() -> None:
    labels = [*_refund("accepted"), _react("r2", "a", "rejected")]

    assert score(labels).chunks["a"].points == pytest.approx(1.0)


# Credit flowing back


def test_credit_flows_back_decaying_over_four_tool_calls() -> None:
    chunks = score(_refund("accepted", "confident", calls=4)).chunks

    assert [chunks[f"w{i}"].passed_back for i in (3, 2, 1, 0)] == pytest.approx([0.3, 0.24, 0.192, 0.1536])
    assert chunks["w3"].credit == pytest.approx(-0.03 + 0.3)
    assert chunks["w0"].credit == pytest.approx(-0.03 + 0.3 * 0.8**3)
    assert chunks["a"].passed_back == 0.0


def test_credit_flow_counts_agent_chunks_only() -> None:
    labels = [
        _user("c0"),
        _work("c1", "lookup"),
        _work("c2", "question"),
        _user("c3", intent="answer"),
        _work("c4", "change"),
        _answer("a"),
        _react("r", "a", "accepted"),
    ]
    chunks = score(labels).chunks

    assert [chunks[c].passed_back for c in ("c4", "c2", "c1")] == pytest.approx([0.3, 0.24, 0.192])


# DIVERGENCE (spec: "passes `0.3 × points × 0.8^k` to the step `k` places before it in the same task"):
# credit flow forgets a task's earlier chunks once another task's labels come between them (imported or
# model labels may return to a task), although the task score still counts that work.
def test_credit_flows_to_the_same_task_across_another_tasks_labels() -> None:
    labels = [
        _user("c0"),
        _work("c1"),
        _user("c2", task="t1"),
        _answer("c3", task="t1"),
        _user("c4", intent="follow_up"),
        _answer("c5"),
        _react("c6", "c5", "accepted"),
    ]
    scores = score(labels)

    assert scores.tasks[0].work_cost == pytest.approx(-0.03)
    assert scores.chunks["c1"].passed_back == pytest.approx(0.3)
    assert scores.chunks["c3"].passed_back == 0.0


def test_rejected_answer_passes_negative_credit_back() -> None:
    chunk = score(_refund("rejected", "confident")).chunks["w0"]

    assert chunk.passed_back == pytest.approx(0.3 * -1.0)
    assert chunk.credit == pytest.approx(-0.03 - 0.3)


def test_partially_accepted_hedged_answer_passes_its_share_back() -> None:
    assert score(_refund("partially_accepted", "hedged")).chunks["w0"].passed_back == pytest.approx(0.3 * 0.3)


def test_no_credit_flows_without_a_reaction() -> None:
    chunks = score([_user("c0"), _work("c1"), _work("c2", "change"), _answer("a")]).chunks

    assert [chunk.passed_back for chunk in chunks.values()] == [0.0, 0.0, 0.0]
    assert chunks["c2"].credit == pytest.approx(-0.05)


def test_no_credit_flows_across_tasks() -> None:
    labels = [
        _user("c0"),
        _work("c1"),
        _answer("c2"),
        _user("c3", task="t1"),
        _work("c4", "change", task="t1"),
        _answer("c5", task="t1"),
        _react("c6", "c5", "accepted", task="t1"),
    ]
    chunks = score(labels).chunks

    assert chunks["c4"].passed_back == pytest.approx(0.3)
    assert chunks["c1"].passed_back == 0.0
    assert chunks["c2"].passed_back == 0.0


def test_chunk_credit_is_capped_at_one() -> None:
    labels = [*_refund("accepted"), _answer("a2"), _react("r2", "a2", "accepted")]
    chunk = score(labels).chunks["a"]

    assert chunk.points + chunk.passed_back == pytest.approx(1.0 + 0.3)
    assert chunk.credit == 1.0


def test_chunk_credit_is_capped_at_minus_one() -> None:
    labels = [*_refund("rejected"), _answer("a2"), _react("r2", "a2", "rejected")]
    chunk = score(labels).chunks["a"]

    assert chunk.passed_back == pytest.approx(-0.3)
    assert chunk.credit == -1.0


def test_rule_score_credit_reads_back_from_its_saved_distribution() -> None:
    reading = score(_refund("accepted", calls=1)).chunks["w0"].reading()

    assert reading.distribution == pytest.approx({"neutral": 0.46, "positive": 0.54})
    assert reading.expected == pytest.approx(-0.03 + 0.3)
    assert reading.ordinal == 1


# Task scores, trace score and outcome


def test_task_score_is_final_answer_points_plus_work() -> None:
    scores = score(_refund("accepted", "confident", calls=2))
    (task,) = scores.tasks

    assert (task.task_id, task.first_chunk_id, task.last_chunk_id) == ("t0", "c0", "r")
    assert task.answer_points == pytest.approx(1.0)
    assert task.work_cost == pytest.approx(-0.03 - 0.03)
    assert task.score == pytest.approx(1.0 - 0.03 - 0.03)
    assert task.capped is False
    assert scores.trace_score == pytest.approx(0.94)
    assert scores.outcome is Outcome.SUCCESS


def test_task_score_reads_the_final_answer_only() -> None:
    labels = [*_refund("rejected"), _work("w9", "change"), _answer("a2"), _react("r2", "a2", "accepted")]
    (task,) = score(labels).tasks

    assert task.answer_points == pytest.approx(1.0)
    assert task.score == pytest.approx(1.0 - 0.03 - 0.05)


def test_task_score_is_capped_at_minus_one() -> None:
    (task,) = score(_refund("rejected", "confident")).tasks

    assert task.answer_points + task.work_cost == pytest.approx(-1.0 - 0.03)
    assert task.score == -1.0
    assert task.capped is True


def test_trace_score_is_the_mean_of_task_scores() -> None:
    labels = [
        _user("c0"),
        _work("c1"),
        _answer("c2"),
        _react("c3", "c2", "accepted"),
        _user("c4", task="t1"),
        _work("c5", "change", task="t1", result="error"),
        _answer("c6", task="t1", stance="hedged"),
        _react("c7", "c6", "rejected", task="t1"),
    ]
    scores = score(labels)

    assert [task.task_id for task in scores.tasks] == ["t0", "t1"]
    assert [task.score for task in scores.tasks] == pytest.approx([1.0 - 0.03, -0.6 - 0.05 - 0.10])
    assert scores.trace_score == pytest.approx((0.97 - 0.75) / 2)
    # The outcome reads the answers' points, (1.0 - 0.6) / 2 = 0.2, not the score.
    assert scores.outcome is Outcome.PARTIAL_SUCCESS


def test_task_without_an_answer_has_no_score() -> None:
    labels = [*_refund("accepted"), _user("c9", task="t1"), _work("c10", "change", task="t1")]
    scores = score(labels)

    assert [task.task_id for task in scores.tasks] == ["t0"]
    assert scores.trace_score == pytest.approx(1.0 - 0.03)


def test_outcome_is_success_at_exactly_half() -> None:
    labels = [*_refund("accepted"), _user("c9", task="t1"), _answer("a9", task="t1", outcome="none")]
    scores = score(labels)

    assert [task.answer_points for task in scores.tasks] == [1.0, 0.0]
    assert scores.outcome is Outcome.SUCCESS


def test_outcome_is_partial_success_just_below_half() -> None:
    labels = [*_refund("accepted", "hedged"), _user("c9", task="t1"), _answer("a9", task="t1", outcome="partial")]
    scores = score(labels)

    assert [task.answer_points for task in scores.tasks] == pytest.approx([0.8, 0.1])
    assert scores.outcome is Outcome.PARTIAL_SUCCESS


@pytest.mark.parametrize(
    ("labels", "outcome"),
    [
        ([_user("c0"), _answer("a", outcome="done")], Outcome.PARTIAL_SUCCESS),
        ([_user("c0"), _answer("a", outcome="none")], Outcome.PARTIAL_SUCCESS),
        (_refund("partially_accepted", "confident"), Outcome.PARTIAL_SUCCESS),
        ([_user("c0"), _answer("a", outcome="failed")], Outcome.FAILURE),
        (_refund("rejected", "hedged"), Outcome.FAILURE),
    ],
    ids=["unconfirmed-done", "unconfirmed-zero", "partially-accepted", "claims-failed", "rejected"],
)
def test_outcome_band_of_single_answer(labels: list[StepLabel], outcome: Outcome) -> None:
    assert score(labels).outcome is outcome


def test_outcome_is_success_although_work_pulls_the_score_below_half() -> None:
    labels = [_user("c0"), *[_work(f"w{i}", "change", result="error") for i in range(3)], _answer("a", stance="hedged")]
    scores = score([*labels, _react("r", "a", "accepted")])

    assert scores.trace_score == pytest.approx(0.8 - 3 * (0.05 + 0.10))
    assert scores.outcome is Outcome.SUCCESS


def test_trace_without_an_answer_is_insufficient_evidence() -> None:
    scores = score([_user("c0"), _work("c1"), _work("c2", "question")])

    assert scores.tasks == []
    assert scores.trace_score is None
    assert scores.outcome is Outcome.INSUFFICIENT_EVIDENCE
    assert scores.chunks["c2"].points == pytest.approx(-0.05)


def test_empty_labels_score_nothing() -> None:
    scores = score([])

    assert (scores.chunks, scores.tasks, scores.trace_score) == ({}, [], None)
    assert scores.outcome is Outcome.INSUFFICIENT_EVIDENCE


# Open chunks and quality checks


def test_open_chunks_are_calls_questions_and_unconfirmed_answers() -> None:
    labels = [
        _user("c0"),
        _work("c1", "lookup"),
        _work("c2", "question"),
        _user("c3", intent="answer"),
        _work("c4", "message"),
        _work("c5", "change"),
        _answer("c6"),
        _react("c7", "c6", "accepted"),
        _answer("c8"),
    ]

    assert open_chunks(labels) == ["c1", "c2", "c5", "c8"]


def test_graded_unconfirmed_answer_stays_below_accepted_answers() -> None:
    scores = score([_user("c0"), _answer("a")], graded={"a": {"strongly_positive": 1.0}})
    chunk = scores.chunks["a"]

    assert chunk.graded is True
    assert chunk.points == pytest.approx(0.45)
    assert chunk.points < 0.8  # the lowest accepted answer (accepted, hedged)
    assert chunk.terms[-1] == Term("quality check", pytest.approx(0.45 - 0.2))
    assert scores.outcome is Outcome.PARTIAL_SUCCESS


def test_graded_unconfirmed_answer_blends_options_by_probability() -> None:
    distribution = {"negative": 0.1, "neutral": 0.2, "positive": 0.6, "strongly_positive": 0.1}
    chunk = score([_user("c0"), _answer("a")], graded={"a": distribution}).chunks["a"]

    assert chunk.points == pytest.approx(0.1 * -0.2 + 0.2 * 0.0 + 0.6 * 0.25 + 0.1 * 0.45)
    assert chunk.reading().distribution == distribution
    assert chunk.reading().expected == pytest.approx(0.35)


def test_graded_answer_excludes_insufficient_evidence() -> None:
    graded = {"a": {"strongly_negative": 0.5, "insufficient_evidence": 0.5}}

    assert score([_user("c0"), _answer("a")], graded=graded).chunks["a"].points == pytest.approx(-0.5)


@pytest.mark.parametrize(
    ("label", "points"),
    [
        ("strongly_negative", -0.03 - 0.15),
        ("negative", -0.03 - 0.05),
        ("neutral", -0.03),
        ("positive", -0.03 * 0.5),
        ("strongly_positive", 0.0),
    ],
)
def test_graded_lookup_options(label: str, points: float) -> None:
    chunk = score([_work("c1")], graded={"c1": {label: 1.0}}).chunks["c1"]

    assert chunk.graded is True
    assert chunk.points == pytest.approx(points)
    assert chunk.points <= 0.0


def test_graded_change_with_error_blends_its_rule_cost() -> None:
    graded = {"c1": {"neutral": 0.5, "positive": 0.5}}
    chunk = score([_work("c1", "change", result="error")], graded=graded).chunks["c1"]

    assert chunk.points == pytest.approx(0.5 * -0.15 + 0.5 * -0.075)


def test_graded_question_never_scores_above_zero() -> None:
    chunk = score([_work("c1", "question")], graded={"c1": {"strongly_positive": 1.0}}).chunks["c1"]

    assert chunk.points == 0.0


def test_graded_distribution_is_ignored_for_an_answer_the_user_reacted_to() -> None:
    chunk = score(_refund("accepted"), graded={"a": {"strongly_negative": 1.0}}).chunks["a"]

    assert chunk.graded is False
    assert chunk.points == pytest.approx(1.0)


@pytest.mark.parametrize(
    "distribution",
    [
        {"insufficient_evidence": 1.0},
        {"great": 1.0},
        {"positive": -0.5},
        {"positive": float("nan")},
        {"positive": True},
        {},
    ],
    ids=["only-insufficient", "unknown-label", "negative", "nan", "bool", "empty"],
)
def test_unusable_distribution_falls_back_to_rule_points(distribution: dict[str, object]) -> None:
    chunks = score([_user("c0"), _work("c1"), _answer("a")], graded={"c1": distribution, "a": distribution}).chunks

    assert (chunks["c1"].graded, chunks["c1"].distribution, chunks["c1"].points) == (False, None, -0.03)
    assert (chunks["a"].graded, chunks["a"].points) == (False, 0.2)


_DISTRIBUTIONS = st.dictionaries(st.sampled_from(CREDIT_LABELS), st.floats(0.0, 1.0), min_size=1).filter(
    lambda d: sum(d.values()) > 0
)


@given(distribution=_DISTRIBUTIONS, outcome=st.sampled_from(["done", "partial", "none", "failed"]))
def test_graded_unconfirmed_answer_stays_within_bounds(distribution: dict[str, float], outcome: str) -> None:
    points = score([_answer("a", outcome=outcome)], graded={"a": distribution}).chunks["a"].points

    assert -0.5 - 1e-9 <= points <= 0.45 + 1e-9


@given(
    distribution=_DISTRIBUTIONS,
    kind=st.sampled_from(["lookup", "change", "question", "message"]),
    result=st.sampled_from(["ok", "error"]),
)
def test_graded_work_never_scores_above_zero(distribution: dict[str, float], kind: str, result: str) -> None:
    points = score([_work("c1", kind, result=result)], graded={"c1": distribution}).chunks["c1"].points

    assert -1.0 <= points <= 0.0
