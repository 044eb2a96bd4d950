"""Grading-model quality checks through the real openai client against the local provider stand-in."""

from __future__ import annotations

import math
import re
from typing import Any

import openai
import pytest
from fakes.llm_server import FakeLLM
from structlog.testing import capture_logs

from stash_common.steps import TraceStep
from stash_labeler.chunks import cut_chunks
from stash_labeler.labeling.rule_labeler import label_chunks
from stash_labeler.scoring.grading import OpenAIGrader, distribution_from_logprobs
from stash_labeler.traces import LabelerTrace

LABELS = ("strongly_negative", "negative", "neutral", "positive", "strongly_positive", "insufficient_evidence")
REQUEST = "I want a refund for order 1182"


def _trace(*extra: TraceStep) -> LabelerTrace:
    steps = (
        TraceStep("s0", 0, "system", "You are a support agent."),
        TraceStep("s1", 1, "user", REQUEST),
        TraceStep("s2", 2, "assistant", "", "lookup_order", {"order_id": "1182"}, "call_1"),
        TraceStep("s3", 3, "tool", '{"status": "delivered"}', "lookup_order", None, "call_1"),
        TraceStep("s4", 4, "assistant", "Which card should the refund go to?"),
        TraceStep("s5", 5, "user", "The visa please"),
        TraceStep("s6", 6, "assistant", "Your refund for order 1182 is on its way."),
        *extra,
    )
    return LabelerTrace("trace-1", "owner-1", 1, "stash", steps)


def _grade(fake_llm: FakeLLM, trace: LabelerTrace, open_ids: list[str], **kwargs: Any) -> dict[str, dict[str, float]]:
    chunks = cut_chunks(trace)
    labels = {label.chunk_id: label for label in label_chunks(chunks)}
    client = openai.OpenAI(api_key="test-key", base_url=fake_llm.url + "/v1", max_retries=0)
    return OpenAIGrader(client, "grader-1", **kwargs).grade(trace, chunks, labels, open_ids)


def _asked(body: dict[str, Any]) -> str:
    return re.search(r"How good was the [a-z ]+ (c\d+)\?", body["messages"][-1]["content"]).group(1)


def _one_hot(label: str) -> dict[str, float]:
    return {name: float(name == label) for name in LABELS}


def test_distribution_sums_each_letter_over_its_tokenizations(fake_llm: FakeLLM) -> None:
    fake_llm.reply = lambda _path, _body: "D"
    fake_llm.logprobs = lambda _path, _body: {"D": 0.4, " D": 0.1, "B": 0.2, " B": 0.1, "F": 0.1, "The": 0.1}

    graded = _grade(fake_llm, _trace(), ["c1"])

    assert list(graded["c1"]) == list(LABELS)
    assert graded["c1"] == pytest.approx(
        {"strongly_negative": 0, "negative": 1 / 3, "neutral": 0, "positive": 5 / 9, "strongly_positive": 0,
         "insufficient_evidence": 1 / 9}
    )  # fmt: skip


def test_only_the_first_tokens_top_ten_alternatives_count(fake_llm: FakeLLM) -> None:
    fake_llm.reply = lambda _path, _body: "E"
    noise = {f"word{n}": 0.05 for n in range(9)}
    fake_llm.logprobs = lambda _path, _body: {"E": 0.5, **noise, "A": 0.01}

    graded = _grade(fake_llm, _trace(), ["c1"])

    assert graded["c1"] == _one_hot("strongly_positive")


def test_answer_without_logprobs_counts_as_certain_of_its_letter(fake_llm: FakeLLM) -> None:
    fake_llm.reply = lambda _path, _body: " C"

    graded = _grade(fake_llm, _trace(), ["c1", "c2"])

    assert graded == {"c1": _one_hot("neutral"), "c2": _one_hot("neutral")}


def test_logprobs_naming_no_option_fall_back_to_the_letter(fake_llm: FakeLLM) -> None:
    fake_llm.reply = lambda _path, _body: "B"
    fake_llm.logprobs = lambda _path, _body: {"The": 0.7, "I": 0.3}

    assert _grade(fake_llm, _trace(), ["c1"]) == {"c1": _one_hot("negative")}


def test_failed_question_leaves_only_that_step_ungraded(fake_llm: FakeLLM) -> None:
    fake_llm.reply = lambda _path, body: "I cannot say" if _asked(body) == "c2" else "D"

    with capture_logs() as logs:
        graded = _grade(fake_llm, _trace(), ["c1", "c2", "c4"])

    assert graded == {"c1": _one_hot("positive"), "c4": _one_hot("positive")}
    assert [(log["event"], log["chunk_id"]) for log in logs] == [("quality check failed", "c2")]
    assert "the answer names no option" in logs[0]["error"]


def test_provider_error_leaves_the_steps_ungraded(fake_llm: FakeLLM) -> None:
    fake_llm.fail_status = 500

    assert _grade(fake_llm, _trace(), ["c1", "c4"]) == {}
    assert len(fake_llm.requests) == 2


def test_step_without_a_question_is_left_out_without_a_call(fake_llm: FakeLLM) -> None:
    fake_llm.reply = lambda _path, _body: "D"

    graded = _grade(fake_llm, _trace(), ["c0", "c9", "c4"])

    assert list(graded) == ["c4"]
    assert [_asked(body) for _path, body in fake_llm.requests] == ["c4"]


def test_one_question_per_open_step_about_that_step_and_what_came_before(fake_llm: FakeLLM) -> None:
    fake_llm.reply = lambda _path, _body: "D"

    _grade(fake_llm, _trace(), ["c1", "c2", "c4"])

    bodies = [body for _path, body in fake_llm.requests]
    assert [_asked(body) for body in bodies] == ["c1", "c2", "c4"]
    assert all(body["logprobs"] is True and body["top_logprobs"] == 10 for body in bodies)
    assert all(body["model"] == "grader-1" and body["max_completion_tokens"] == 1 for body in bodies)
    tool_call, question, answer = (body["messages"][-1]["content"] for body in bodies)
    assert "E. necessary and well-formed call" in tool_call and "A. harmful or wrong call" in tool_call
    assert "E. necessary question" in question and "F. the conversation does not show enough" in question
    assert "A. wrong or harmful answer" in answer
    context = bodies[1]["messages"][1]["content"]
    assert REQUEST in context and "lookup_order" in context and "The visa please" not in context
    step = context.split("The step to judge:\n")[1]
    assert step.startswith('[c2] agent message\nWhich card should the refund go to?\nlabel: {"chunk_id":"c2"')
    assert "\n[c" not in step


def test_long_context_is_bounded_and_keeps_the_opening_request(fake_llm: FakeLLM) -> None:
    fake_llm.reply = lambda _path, _body: "D"
    filler = [TraceStep(f"x{n}", 7 + n, "assistant", f"note {n} " + "z" * 2_000) for n in range(40)]

    graded = _grade(fake_llm, _trace(*filler), ["c44"], max_chars=20_000)

    context = fake_llm.requests[0][1]["messages"][1]["content"]
    assert list(graded) == ["c44"] and len(context) <= 20_000
    assert context.startswith(f"Carried over: the user request that opened the task.\n[c0] user message\n{REQUEST}")
    assert "[c43] agent message" in context and "[c4] " not in context


@pytest.mark.parametrize(
    ("alternatives", "expected"),
    [
        ([("A", math.log(0.5)), (" A", math.log(0.25)), ("B", math.log(0.25))],
         {"strongly_negative": 0.75, "negative": 0.25}),
        ([("a", math.log(0.6)), ("C.", math.log(0.2)), (" (F)", math.log(0.2))],
         {"neutral": 0.5, "insufficient_evidence": 0.5}),
        ([("The", math.log(0.9)), ("AB", math.log(0.1))], None),
        ([], None),
    ],
)  # fmt: skip
def test_distribution_from_logprobs_normalises_over_the_options(
    alternatives: list[tuple[str, float]], expected: dict[str, float] | None
) -> None:
    distribution = distribution_from_logprobs(alternatives)

    if expected is None:
        assert distribution is None
    else:
        assert distribution == pytest.approx({name: expected.get(name, 0.0) for name in LABELS})
