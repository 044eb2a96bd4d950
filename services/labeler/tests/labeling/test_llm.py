"""The LLM step labeler through the real openai client against the local provider stand-in."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest
from fakes.llm_server import FakeLLM

from stash_common.steps import TraceStep
from stash_labeler.chunks import Chunk, cut_chunks
from stash_labeler.label_schema import LabelSource, StepLabel
from stash_labeler.labeling.llm import OpenAILabeler
from stash_labeler.labeling.protocol import LabelingError
from stash_labeler.labeling.rule_labeler import label_chunks
from stash_labeler.traces import LabelerTrace

# What a request may hold beyond the character budget: the transcript's header and the carried-over note.
HEADER_MARGIN = 2_000
REQUEST = "Please migrate the billing service to the new database"


def _trace(*steps: tuple[str, str] | tuple[str, str, str, dict[str, Any]]) -> LabelerTrace:
    built = []
    for index, step in enumerate(steps):
        role, content, *tool = step
        name, tool_input = tool if tool else (None, None)
        call_id = f"call_{index}" if role == "assistant" and name else f"call_{index - 1}" if role == "tool" else None
        built.append(TraceStep(f"s{index}", index, role, content, name, tool_input, call_id))
    return LabelerTrace("trace-1", "owner-1", 1, "stash", tuple(built))


def _support_trace() -> LabelerTrace:
    return _trace(
        ("system", "You are a support agent."),
        ("user", "I want a refund for order 1182"),
        ("assistant", "", "lookup_order", {"order_id": "1182"}),
        ("tool", '{"status": "delivered"}', "lookup_order", {}),
        ("assistant", "", "issue_refund", {"order_id": "1182"}),
        ("tool", '{"refund": "ok"}', "issue_refund", {}),
        ("assistant", "Your refund for order 1182 is on its way."),
        ("user", "Thanks, that works!"),
    )


def _long_trace(huge_at: int, huge_chars: int) -> LabelerTrace:
    """c0 opens the task, c60 follows it up, the other chunks up to c198 are tool calls, c199 answers."""
    steps: list[tuple[str, str] | tuple[str, str, str, dict[str, Any]]] = [("user", REQUEST)]
    for number in range(1, 199):
        if number == 60:
            steps.append(("user", "Also check that the invoices table moves too"))
            continue
        output = "x" * huge_chars if number == huge_at else f"migrated table {number}"
        steps += [("assistant", "", "run_migration", {"table": number}), ("tool", output, "run_migration", {})]
    return _trace(*steps, ("assistant", "Everything is migrated."))


def _client(fake_llm: FakeLLM) -> openai.OpenAI:
    return openai.OpenAI(api_key="test-key", base_url=fake_llm.url + "/v1", max_retries=0)


def _target(body: dict[str, Any]) -> str:
    return re.findall(r"Label (?:chunk )?(c\d+)", body["messages"][-1]["content"])[-1]


def _answering(labels: dict[str, StepLabel], wrong: Callable[[str, int], str | None] | None = None) -> Any:
    """A model that answers the rule labels of the named target, or `wrong(target, attempt)` when that is set."""
    attempts: dict[str, int] = {}

    def reply(_path: str, body: dict[str, Any]) -> str:
        target = _target(body)
        attempts[target] = attempts.get(target, 0) + 1
        answer = wrong(target, attempts[target]) if wrong else None
        return answer if answer is not None else labels[target].model_dump_json(exclude_none=True)

    return reply


def _setup(
    fake_llm: FakeLLM, trace: LabelerTrace, **kwargs: Any
) -> tuple[OpenAILabeler, list[Chunk], dict[str, StepLabel]]:
    chunks = cut_chunks(trace)
    expected = {label.chunk_id: label for label in label_chunks(chunks)}
    fake_llm.reply = _answering(expected, kwargs.pop("wrong", None))
    return OpenAILabeler(_client(fake_llm), "gpt-6-sol", **kwargs), chunks, expected


def _bodies(fake_llm: FakeLLM) -> list[dict[str, Any]]:
    return [body for _path, body in fake_llm.requests]


def _by_window(bodies: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    windows: dict[str, list[dict[str, Any]]] = {}
    for body in bodies:
        windows.setdefault(body["prompt_cache_key"], []).append(body)
    return iter(windows.values())


def test_every_target_is_labeled_with_one_call_each(fake_llm: FakeLLM) -> None:
    labeler, chunks, expected = _setup(fake_llm, _support_trace())

    labels = labeler.label(_support_trace(), chunks, [chunk.chunk_id for chunk in chunks], {})

    assert labels == expected
    assert [_target(body) for body in _bodies(fake_llm)] == ["c0", "c1", "c2", "c3", "c4"]
    assert all(path == "/v1/chat/completions" for path, _body in fake_llm.requests)
    body = _bodies(fake_llm)[0]
    assert body["model"] == "gpt-6-sol" and body["prompt_cache_key"] == "trace-1:0"
    assert body["response_format"]["json_schema"]["name"] == "step_label"
    assert body["response_format"]["json_schema"]["strict"] is False
    assert "intent" in body["response_format"]["json_schema"]["schema"]["properties"]
    assert labeler.source is LabelSource.LLM and labeler.model == "gpt-6-sol"


def test_calls_of_a_window_share_their_prefix_and_grow_by_the_answers(fake_llm: FakeLLM) -> None:
    labeler, chunks, expected = _setup(fake_llm, _support_trace())

    labeler.label(_support_trace(), chunks, [chunk.chunk_id for chunk in chunks], {})

    bodies = _bodies(fake_llm)
    assert all(body["messages"][:2] == bodies[0]["messages"][:2] for body in bodies)
    assert [message["role"] for message in bodies[0]["messages"]] == ["system", "user", "user"]
    for earlier, later in zip(bodies, bodies[1:], strict=False):
        assert later["messages"][: len(earlier["messages"])] == earlier["messages"]
        assert len(later["messages"]) == len(earlier["messages"]) + 2
    transcript = bodies[0]["messages"][1]["content"]
    assert '[c1] agent tool call\ncalls tool lookup_order with input {"order_id":"1182"}' in transcript
    assert 'tool result from lookup_order:\n{"status": "delivered"}' in transcript


def test_tool_errors_are_flagged_in_the_transcript(fake_llm: FakeLLM) -> None:
    failed = {"is_error": True, "exit_code": 1}
    trace = LabelerTrace(
        "trace-2",
        "owner-1",
        1,
        "stash",
        (
            TraceStep("s0", 0, "user", "Run the tests"),
            TraceStep("s1", 1, "assistant", "", "bash", {"command": "pytest"}, "call_1"),
            TraceStep("s2", 2, "tool", "1 failed", "bash", None, "call_1", failed),
        ),
    )
    labeler, chunks, expected = _setup(fake_llm, trace)

    assert labeler.label(trace, chunks, ["c1"], {}) == {"c1": expected["c1"]}
    transcript = _bodies(fake_llm)[0]["messages"][1]["content"]
    call = 'calls tool bash with input {"command":"pytest"}'
    assert f"{call}\ntool result (is_error=true, exit_code=1) from bash:\n1 failed" in transcript


def test_labels_of_earlier_targets_are_context_for_later_calls(fake_llm: FakeLLM) -> None:
    labeler, chunks, expected = _setup(fake_llm, _support_trace())

    labeler.label(_support_trace(), chunks, [chunk.chunk_id for chunk in chunks], {})

    last = _bodies(fake_llm)[-1]["messages"]
    answers = [json.loads(message["content"]) for message in last if message["role"] == "assistant"]
    assert [answer["chunk_id"] for answer in answers] == ["c0", "c1", "c2", "c3"]
    assert answers[3] == expected["c3"].model_dump(exclude_none=True, exclude={"evidence", "note"})


def test_known_labels_are_shown_and_only_targets_are_sent(fake_llm: FakeLLM) -> None:
    labeler, chunks, expected = _setup(fake_llm, _support_trace())
    known = {chunk_id: expected[chunk_id] for chunk_id in ("c0", "c1", "c2")}

    labels = labeler.label(_support_trace(), chunks, ["c3", "c4"], known)

    assert labels == {"c3": expected["c3"], "c4": expected["c4"]}
    assert [_target(body) for body in _bodies(fake_llm)] == ["c3", "c4"]
    transcript = _bodies(fake_llm)[0]["messages"][1]["content"]
    assert '[c0] user message\nI want a refund for order 1182\nlabel: {"chunk_id":"c0","task_id":"t0"' in transcript
    assert "label:" not in transcript.split("[c3]")[1]


def test_invalid_answer_is_retried_once_with_the_violation(fake_llm: FakeLLM) -> None:
    user_label = '{"chunk_id": "c2", "task_id": "t0", "actor": "user", "intent": "other", "verdict": "none", '
    user_label += '"sentiment": "neutral"}'
    labeler, chunks, expected = _setup(fake_llm, _support_trace(), wrong=lambda t, n: user_label if n == 1 else None)

    labels = labeler.label(_support_trace(), chunks, ["c2"], {})

    assert labels == {"c2": expected["c2"]}
    first, second = _bodies(fake_llm)
    assert second["messages"][: len(first["messages"])] == first["messages"]
    assert second["messages"][-2] == {"role": "assistant", "content": user_label}
    assert "actor is 'user', but c2 is a chunk of the agent" in second["messages"][-1]["content"]


AGENT_FIELDS = '"type": "change", "effect": "write", "result": "ok", "is_output": false, "outcome": "none", '
AGENT_FIELDS += '"stance": "none", "coverage": "none"'


@pytest.mark.parametrize(
    ("target", "answer", "violation"),
    [
        ("c2", "not json", "not a valid step label"),
        ("c2", "", "the answer is empty"),
        ("c2", '{"chunk_id": "c2", "task_id": "t0", "actor": "agent"}', "a agent label needs type"),
        ("c2", f'{{"chunk_id": "c1", "task_id": "t0", "actor": "agent", {AGENT_FIELDS}}}', "chunk_id is 'c1'"),
        ("c2", f'{{"chunk_id": "c2", "task_id": "t0", "actor": "agent", {AGENT_FIELDS}, "score": 1}}', "score"),
        ("c2", f'{{"chunk_id": "c2", "task_id": "t0", "actor": "agent", "duplicate_of": "c3", {AGENT_FIELDS}}}',
         "duplicate_of 'c3' is not an earlier chunk"),
        ("c4", '{"chunk_id": "c4", "task_id": "t0", "actor": "user", "intent": "feedback", "verdict": "accepted", '
         '"verdict_target": "c4", "sentiment": "positive"}', "verdict_target 'c4' is not an earlier chunk"),
    ],
)  # fmt: skip
def test_answer_that_stays_invalid_fails_naming_the_chunk(
    fake_llm: FakeLLM, target: str, answer: str, violation: str
) -> None:
    labeler, chunks, _ = _setup(fake_llm, _support_trace(), wrong=lambda _t, _n: answer)

    with pytest.raises(LabelingError, match=f"^chunk {target}: no valid label after 2 attempts: ") as caught:
        labeler.label(_support_trace(), chunks, [target], {})

    assert violation in str(caught.value)
    assert [_target(body) for body in _bodies(fake_llm)] == [target, target]


def test_verdict_target_naming_an_earlier_answer_is_accepted(fake_llm: FakeLLM) -> None:
    labeler, chunks, expected = _setup(fake_llm, _support_trace())

    labels = labeler.label(_support_trace(), chunks, ["c4"], {})

    assert labels["c4"].verdict_target == "c3" and len(fake_llm.requests) == 1


def test_provider_error_fails_naming_the_chunk(fake_llm: FakeLLM) -> None:
    labeler, chunks, _ = _setup(fake_llm, _support_trace())
    fake_llm.fail_status = 500

    with pytest.raises(LabelingError, match="^chunk c0: the labeling model failed: "):
        labeler.label(_support_trace(), chunks, ["c0", "c1"], {})

    assert len(fake_llm.requests) == 1


def test_long_trace_uses_overlapping_windows_and_an_excerpt(fake_llm: FakeLLM) -> None:
    trace = _long_trace(huge_at=100, huge_chars=250_000)
    labeler, chunks, expected = _setup(fake_llm, trace, max_chunks=80)

    labels = labeler.label(trace, chunks, [chunk.chunk_id for chunk in chunks], {})

    assert len(chunks) == 200 and labels == expected
    bodies = _bodies(fake_llm)
    assert [_target(body) for body in bodies] == [chunk.chunk_id for chunk in chunks]
    assert all(_request_chars(body) <= 200_000 + HEADER_MARGIN for body in bodies)
    windows = list(_by_window(bodies))
    assert len(windows) >= 3
    for window in windows:
        transcript = window[0]["messages"][1]["content"]
        first = int(_target(window[0])[1:])
        assert f"[c0] user message\n{REQUEST}" in transcript
        assert len(re.findall(r"^\[c\d+\] ", transcript, re.MULTILINE)) <= 80 + 1
        assert first == 0 or f"[c{first - 1}] " in transcript
    huge = [
        window[0]["messages"][1]["content"] for window in windows if "[c100] " in window[0]["messages"][1]["content"]
    ]
    assert huge and all(re.search(r"\[… 2\d{2},\d{3} characters omitted …\]", text) for text in huge)


def test_windows_are_bounded_by_characters(fake_llm: FakeLLM) -> None:
    steps = [("user", REQUEST)] + [("assistant", f"step {n} " + "y" * 3_000) for n in range(30)]
    trace = _trace(*steps)
    labeler, chunks, expected = _setup(fake_llm, trace, max_chars=20_000)

    labels = labeler.label(trace, chunks, [chunk.chunk_id for chunk in chunks], {})

    assert labels == expected
    bodies = _bodies(fake_llm)
    assert all(_request_chars(body) <= 20_000 + HEADER_MARGIN for body in bodies)
    assert len(list(_by_window(bodies))) >= 5
    assert all(REQUEST in body["messages"][1]["content"] for body in bodies)
    assert "Carried over: the user request that opened the task." in bodies[-1]["messages"][1]["content"]


def test_limits_too_small_to_show_a_chunk_are_refused(fake_llm: FakeLLM) -> None:
    with pytest.raises(ValueError, match="max_chars >= 5,600"):
        OpenAILabeler(_client(fake_llm), "gpt-6-sol", max_chars=5_000)


def _request_chars(body: dict[str, Any]) -> int:
    return sum(len(message["content"]) for message in body["messages"] if message["role"] != "system")
