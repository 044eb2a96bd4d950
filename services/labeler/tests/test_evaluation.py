"""One revision's evaluation: where labels come from, what is reused, and how quality checks change scores."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import openai
import pytest
from fakes.llm_server import FakeLLM

from stash_common.steps import TraceStep
from stash_labeler.chunks import Chunk
from stash_labeler.evaluation import evaluate
from stash_labeler.label_schema import LabelSource, StepLabel
from stash_labeler.labeling.rule_labeler import RuleLabeler
from stash_labeler.scoring.grading import OpenAIGrader
from stash_labeler.traces import LabelerTrace

STEPS = (
    TraceStep("s0", 0, "system", "You are a support agent."),
    TraceStep("s1", 1, "user", "I want a refund for order 1182"),
    TraceStep("s2", 2, "assistant", "", "lookup_order", {"order_id": "1182"}, "call_1"),
    TraceStep("s3", 3, "tool", '{"status": "delivered"}', "lookup_order", None, "call_1"),
    TraceStep("s4", 4, "assistant", "Your refund for order 1182 is on its way."),
)


def _trace(*extra: TraceStep, revision: int = 1) -> LabelerTrace:
    return LabelerTrace("trace-1", "owner-1", revision, "stash", STEPS + extra)


class RecordingGrader:
    """Grades every open chunk it is asked about as strongly positive, and remembers what it was asked."""

    def __init__(self) -> None:
        self.asked: list[list[str]] = []

    def grade(
        self,
        trace: LabelerTrace,
        chunks: Sequence[Chunk],
        labels: Mapping[str, StepLabel],
        open_chunk_ids: Sequence[str],
    ) -> dict[str, dict[str, float]]:
        self.asked.append(list(open_chunk_ids))
        return {chunk_id: {"strongly_positive": 1.0} for chunk_id in open_chunk_ids}


def test_rule_labels_lay_out_per_step_with_the_reward_on_the_action() -> None:
    result = evaluate(_trace(), RuleLabeler(), {})

    steps = {step["step_id"]: step for step in result.body["steps"]}
    assert "s0" not in steps  # system steps are context
    assert steps["s2"]["reward"]["points"] == pytest.approx(-0.03)
    assert "reward" not in steps["s3"] and steps["s3"]["label"] == steps["s2"]["label"]
    assert steps["s4"]["expected_credit"] == pytest.approx(0.2)
    assert result.labeler == LabelSource.RULES and result.outcome == "partial_success"


def test_quality_checks_grade_open_chunks_once_and_keep_the_distribution() -> None:
    grader = RecordingGrader()
    first = evaluate(_trace(), RuleLabeler(), {}, grader)
    grown = _trace(TraceStep("s5", 5, "user", "And order 1183?"), revision=2)

    evaluate(grown, RuleLabeler(), first.labels, grader)

    assert grader.asked == [["c1", "c2"]]  # the unchanged chunks keep their distributions: no second call
    steps = {step["step_id"]: step for step in first.body["steps"]}
    assert steps["s2"]["reward"]["points"] == 0.0  # a necessary call gives its cost back, never above zero
    assert steps["s4"]["reward"]["points"] == pytest.approx(0.45)  # an unconfirmed answer stays below accepted
    assert steps["s4"]["expected_credit"] == pytest.approx(1.0)
    assert steps["s4"]["reward"]["terms"][-1]["reason"] == "quality check"


def test_an_accepted_answer_is_not_open_and_is_never_graded() -> None:
    grader = RecordingGrader()

    evaluate(_trace(TraceStep("s5", 5, "user", "Perfect, thanks!")), RuleLabeler(), {}, grader)

    assert grader.asked == [["c1"]]


def test_the_grading_model_through_the_openai_client_blends_option_points(fake_llm: FakeLLM) -> None:
    fake_llm.reply = lambda _path, _body: "E"
    fake_llm.logprobs = lambda _path, _body: {"E": 0.5, "D": 0.5}
    client = openai.OpenAI(api_key="test", base_url=f"{fake_llm.url}/v1", max_retries=0)

    result = evaluate(_trace(), RuleLabeler(), {}, OpenAIGrader(client, "grader"))

    answer = next(step for step in result.body["steps"] if step["step_id"] == "s4")
    assert answer["reward"]["points"] == pytest.approx(0.5 * 0.45 + 0.5 * 0.25)
    assert answer["expected_credit"] == pytest.approx(0.75)
    assert len(fake_llm.requests) == 2  # one question per open chunk
