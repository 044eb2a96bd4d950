"""Section summaries and completion estimates through the real anthropic client and the local stand-in."""

import json
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import grpc
import orjson
import pytest
from fakes.llm_server import FakeLLM
from sqlalchemy import update

from stash.rm.v1 import ingest_pb2, labeler_pb2
from stash_common.db import transaction, utc_now
from stash_ingest.titles import derive_title
from stash_labeler.assessments import AnthropicFastModel
from stash_labeler.assessments.cache import claim
from stash_labeler.assessments.summaries import ranges_of
from stash_labeler.clients import IngestClient
from stash_labeler.labeling.rule_labeler import RuleLabeler
from stash_labeler.store import SectionSummaryRow
from support.fixtures import real_fixture
from support.ingest import OTHER_OWNER, OWNER, import_payload, serve_ingest, stash_line
from support.labeler import RunningLabeler, serve_labeler

Wired = Callable[..., tuple[Any, RunningLabeler]]


@pytest.fixture
def wired(postgres_url: str, fake_llm: FakeLLM) -> Iterator[Wired]:
    """Ingest and a labeler whose fast model is the real anthropic client on the stand-in (or none)."""
    stops: list[Callable[[], None]] = []

    def start(model: bool = True) -> tuple[Any, RunningLabeler]:
        ingest, stop_ingest = serve_ingest(postgres_url, derive_title)
        fast_model = AnthropicFastModel("test-key", "claude-haiku-4-5", fake_llm.url) if model else None
        running = serve_labeler(postgres_url, ingest, RuleLabeler(), start_worker=False, fast_model=fast_model)
        stops.extend([running.stop, stop_ingest])
        return ingest, running

    yield start
    for stop in stops:
        stop()


def _import(ingest: Any, data: str | None = None, fmt: str = "stash", owner: str = OWNER) -> tuple[str, list[str]]:
    trace_id = import_payload(ingest, data or stash_line("support"), fmt=fmt, owner=owner).trace_ids[0]
    trace = ingest.GetTrace(ingest_pb2.GetTraceRequest(owner_id=owner, trace_id=trace_id), timeout=30).trace
    return trace_id, [step.id for step in trace.steps]


def _summarize(labeler: RunningLabeler, trace_id: str, *ranges: tuple[str, str], owner: str = OWNER) -> Any:
    request = labeler_pb2.SummarizeSectionsRequest(
        owner_id=owner,
        trace_id=trace_id,
        ranges=[labeler_pb2.SectionRange(first_step_id=first, last_step_id=last) for first, last in ranges],
    )
    return labeler.stub.SummarizeSections(request, timeout=60).summaries


def _completion(labeler: RunningLabeler, trace_id: str, owner: str = OWNER) -> Any:
    request = labeler_pb2.GetTraceCompletionRequest(owner_id=owner, trace_id=trace_id)
    return labeler.stub.GetTraceCompletion(request, timeout=60)


def _tool(body: dict[str, Any]) -> dict[str, Any]:
    return body["tools"][0]


def _echo_ranges(score: float | None = 0.75) -> Callable[[str, dict[str, Any]], str]:
    """Answers every range field of the schema, titled by its field name and bound to its step ids."""

    def reply(_path: str, body: dict[str, Any]) -> str:
        answer = {}
        for field, schema in _tool(body)["input_schema"]["properties"].items():
            bound = schema["properties"]
            answer[field] = {
                "first_step_id": bound["first_step_id"]["const"],
                "last_step_id": bound["last_step_id"]["const"],
                "title": f"title of {field}",
                "summary": "The agent looked up the order.",
                "objective": "Find the order's status",
                "score": score,
                "reason": "no evidence of the outcome" if score is None else "the lookup answered",
            }
        return json.dumps(answer)

    return reply


def test_each_range_gets_its_own_schema_field_and_answer(wired: Wired, fake_llm: FakeLLM) -> None:
    ingest, labeler = wired()
    trace_id, steps = _import(ingest)
    fake_llm.reply = _echo_ranges()

    summaries = _summarize(labeler, trace_id, (steps[1], steps[3]), (steps[4], steps[4]))

    ((path, body),) = fake_llm.requests
    assert path == "/v1/messages" and body["model"] == "claude-haiku-4-5"
    assert body["tool_choice"] == {"type": "tool", "name": _tool(body)["name"]}
    properties = _tool(body)["input_schema"]["properties"]
    assert list(properties) == ["range_1", "range_2"]
    assert properties["range_2"]["properties"]["first_step_id"]["const"] == steps[4]
    assert "I want a refund for order 1182" in body["messages"][0]["content"]
    assert [(s.first_step_id, s.last_step_id, s.title, s.score) for s in summaries] == [
        (steps[1], steps[3], "title of range_1", 0.75),
        (steps[4], steps[4], "title of range_2", 0.75),
    ]
    assert not any(s.pending or s.unavailable for s in summaries)


def test_missing_evidence_is_a_null_score_with_its_reason(wired: Wired, fake_llm: FakeLLM) -> None:
    ingest, labeler = wired()
    trace_id, steps = _import(ingest)
    fake_llm.reply = _echo_ranges(score=None)

    (summary,) = _summarize(labeler, trace_id, (steps[2], steps[4]))

    assert not summary.HasField("score")
    assert summary.reason == "no evidence of the outcome"


def test_a_context_range_is_never_scored(wired: Wired, fake_llm: FakeLLM) -> None:
    ingest, labeler = wired()
    trace_id, steps = _import(ingest)
    fake_llm.reply = _echo_ranges()

    (summary,) = _summarize(labeler, trace_id, (steps[0], steps[1]))

    assert not summary.HasField("score")
    assert summary.reason.startswith("context")


def test_an_unchanged_section_is_read_from_the_cache_without_a_model_call(wired: Wired, fake_llm: FakeLLM) -> None:
    ingest, labeler = wired()
    trace_id, steps = _import(ingest)
    fake_llm.reply = _echo_ranges()
    first = _summarize(labeler, trace_id, (steps[1], steps[4]))

    again = _summarize(labeler, trace_id, (steps[1], steps[4]))
    more = _summarize(labeler, trace_id, (steps[1], steps[4]), (steps[2], steps[3]))

    assert len(fake_llm.requests) == 2  # the first call, then only the new range
    assert list(_tool(fake_llm.requests[1][1])["input_schema"]["properties"]) == ["range_1"]
    assert again[0] == first[0] == more[0]
    assert more[1].first_step_id == steps[2] and more[1].title == "title of range_1"


def test_changed_evidence_generates_again(wired: Wired, fake_llm: FakeLLM) -> None:
    ingest, labeler = wired()
    trace = orjson.loads(stash_line("support"))
    trace_id, steps = _import(ingest, orjson.dumps(trace).decode())
    fake_llm.reply = _echo_ranges()
    _summarize(labeler, trace_id, (steps[1], steps[4]))

    trace["steps"][4]["content"] = "Your order was delivered; no refund is possible."
    same_trace, changed = _import(ingest, orjson.dumps(trace).decode())
    _summarize(labeler, same_trace, (changed[1], changed[4]))

    assert same_trace == trace_id
    assert len(fake_llm.requests) == 2
    assert "no refund is possible" in fake_llm.requests[1][1]["messages"][0]["content"]


def test_two_concurrent_requests_make_one_generation(wired: Wired, fake_llm: FakeLLM) -> None:
    ingest, labeler = wired()
    trace_id, steps = _import(ingest)
    arrived, release = threading.Event(), threading.Event()
    echo = _echo_ranges()

    def held_reply(path: str, body: dict[str, Any]) -> str:
        arrived.set()
        release.wait(30)
        return echo(path, body)

    fake_llm.reply = held_reply
    results: list[Any] = []
    first = threading.Thread(target=lambda: results.append(_summarize(labeler, trace_id, (steps[1], steps[4]))))
    first.start()
    assert arrived.wait(30)

    (second,) = _summarize(labeler, trace_id, (steps[1], steps[4]))
    release.set()
    first.join(30)

    assert second.pending and not second.unavailable and not second.title
    assert results[0][0].title == "title of range_1"
    assert len(fake_llm.requests) == 1
    assert _summarize(labeler, trace_id, (steps[1], steps[4]))[0] == results[0][0]


def test_an_expired_lease_of_interrupted_work_is_taken_over(wired: Wired, fake_llm: FakeLLM) -> None:
    ingest, labeler = wired()
    trace_id, steps = _import(ingest)
    fake_llm.reply = _echo_ranges()
    traces = IngestClient(ingest)
    trace = traces.trace_revision(OWNER, trace_id, traces.current_revision(OWNER, trace_id))
    (step_range,) = ranges_of(trace.steps, [(steps[1], steps[3])])
    with transaction(labeler.sessions) as session:  # a generation that took the lease and never finished
        key = {"owner_id": OWNER, "trace_id": trace_id, **step_range.key}
        interrupted = claim(session, SectionSummaryRow, key, lease_s=60)
    assert _summarize(labeler, trace_id, (steps[1], steps[3]))[0].pending

    with transaction(labeler.sessions) as session:
        expired = update(SectionSummaryRow).where(SectionSummaryRow.id == interrupted.row_id)
        session.execute(expired.values(lease_until=utc_now() - timedelta(seconds=1)))
    recovered = _summarize(labeler, trace_id, (steps[1], steps[3]))

    assert recovered[0].title == "title of range_1" and not recovered[0].pending
    assert len(fake_llm.requests) == 1


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (lambda _path, _body: "I think it went well.", "answered without calling record_section_assessments"),
        (lambda path, body: _echo_ranges(score=1.7)(path, body), "range_1.score must be a number from 0 to 1"),
        (lambda _path, _body: '{"range_2": {}}', "the answer has no range_1 object"),
    ],
)
def test_malformed_model_output_is_unavailable_with_the_reason(
    wired: Wired, fake_llm: FakeLLM, reply: Any, reason: str
) -> None:
    ingest, labeler = wired()
    trace_id, steps = _import(ingest)
    fake_llm.reply = reply

    (summary,) = _summarize(labeler, trace_id, (steps[1], steps[4]))
    (again,) = _summarize(labeler, trace_id, (steps[1], steps[4]))

    assert summary.unavailable and reason in summary.unavailable_reason
    assert again.unavailable and len(fake_llm.requests) == 1  # a failure is not retried at once


def test_a_provider_error_is_unavailable(wired: Wired, fake_llm: FakeLLM) -> None:
    ingest, labeler = wired()
    trace_id, steps = _import(ingest)
    fake_llm.fail_status = 400

    (summary,) = _summarize(labeler, trace_id, (steps[1], steps[4]))

    assert summary.unavailable and "claude-haiku-4-5 failed" in summary.unavailable_reason


def test_another_owners_trace_is_not_found_before_the_cache_or_the_model(wired: Wired, fake_llm: FakeLLM) -> None:
    ingest, labeler = wired()
    trace_id, steps = _import(ingest, owner=OTHER_OWNER)

    for call in (lambda: _summarize(labeler, trace_id, (steps[1], steps[4])), lambda: _completion(labeler, trace_id)):
        with pytest.raises(grpc.RpcError) as caught:
            call()
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    assert fake_llm.requests == []


@pytest.mark.parametrize("count", [0, 5])
def test_one_to_four_ranges_are_accepted(wired: Wired, fake_llm: FakeLLM, count: int) -> None:
    ingest, labeler = wired()
    trace_id, steps = _import(ingest)

    with pytest.raises(grpc.RpcError) as caught:
        _summarize(labeler, trace_id, *[(steps[1], steps[2])] * count)

    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "1 to 4 ranges" in caught.value.details()
    assert fake_llm.requests == []


def test_a_range_outside_the_trace_or_backwards_is_refused(wired: Wired, fake_llm: FakeLLM) -> None:
    ingest, labeler = wired()
    trace_id, steps = _import(ingest)

    for first, last, message in ((steps[1], "nope", "'nope' is not a step"), (steps[3], steps[1], "comes after")):
        with pytest.raises(grpc.RpcError) as caught:
            _summarize(labeler, trace_id, (steps[0], steps[1]), (first, last))
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "ranges[1]" in caught.value.details() and message in caught.value.details()
    assert fake_llm.requests == []


def test_without_a_fast_model_both_are_unavailable_naming_the_setting(wired: Wired, fake_llm: FakeLLM) -> None:
    ingest, labeler = wired(model=False)
    trace_id, steps = _import(ingest)

    (summary,) = _summarize(labeler, trace_id, (steps[1], steps[4]))
    completion = _completion(labeler, trace_id)

    assert summary.unavailable and "STASH_ANTHROPIC_API_KEY" in summary.unavailable_reason
    assert completion.unavailable and "STASH_ANTHROPIC_API_KEY" in completion.reason
    assert fake_llm.requests == []


def _session() -> str:
    return real_fixture("claude-code/spotter-v2.1-task-subagent-parent.jsonl").decode()


def _step_of(ingest: Any, trace_id: str) -> list[Any]:
    request = ingest_pb2.GetTraceRequest(owner_id=OWNER, trace_id=trace_id)
    return list(ingest.GetTrace(request, timeout=30).trace.steps)


def test_completion_estimates_each_request_with_tool_results_on_their_calls(wired: Wired, fake_llm: FakeLLM) -> None:
    ingest, labeler = wired()
    trace_id, ids = _import(ingest, _session(), fmt="claude_code")
    steps = _step_of(ingest, trace_id)
    call_of_write, result_of_write = steps[28], steps[29]
    assert call_of_write.tool_call_id == result_of_write.tool_call_id and call_of_write.tool_name == "Write"

    def reply(_path: str, body: dict[str, Any]) -> str:
        return json.dumps(
            {
                "task_1": {
                    "first_step_id": ids[0],
                    "last_step_id": ids[32],
                    "objective": "Draft beads for the linting setup",
                    "checkpoints": [
                        {"step_id": ids[0], "completion": 0, "reason": "request received"},
                        {"step_id": ids[21], "completion": 0.4, "reason": "research done"},
                        {"step_id": result_of_write.id, "completion": 0.7, "reason": "plan written"},
                        {"step_id": ids[31], "completion": 0.6, "reason": "interrupted before creating"},
                    ],
                },
                "task_2": {
                    "first_step_id": ids[33],
                    "last_step_id": ids[42],
                    "objective": "Create the beads",
                    "checkpoints": [{"step_id": ids[42], "completion": None, "reason": "no confirmation shown"}],
                },
            }
        )

    fake_llm.reply = reply
    completion = _completion(labeler, trace_id)
    again = _completion(labeler, trace_id)

    assert not completion.pending and not completion.unavailable
    first, second = completion.tasks
    assert (first.first_step_id, first.last_step_id, first.objective) == (
        ids[0],
        ids[32],
        "Draft beads for the linting setup",
    )
    assert [(p.step_id, p.completion) for p in first.checkpoints] == [
        (ids[0], 0),
        (ids[21], 0.4),
        (call_of_write.id, 0.7),
        (ids[30], 0.6),  # ExitPlanMode's result (31) is shown on its call (30)
    ]
    assert not second.checkpoints[0].HasField("completion")
    assert again == completion and len(fake_llm.requests) == 1
    prompt = fake_llm.requests[0][1]["messages"][0]["content"]
    assert (
        "create the beads" in prompt and "Sampled events (41 of 43 steps)" in prompt
    )  # not the skill text or the interruption


@pytest.mark.parametrize(
    ("checkpoints", "reason"),
    [
        ([{"step_id": 0, "completion": 0.2, "reason": "asked"}], "for receiving the request"),
        (
            [{"step_id": 21, "completion": 0.5, "reason": "b"}, {"step_id": 11, "completion": 0.3, "reason": "a"}],
            "out of order",
        ),
        ([{"step_id": 21, "completion": 1.5, "reason": "more than done"}], "must be a number from 0 to 1"),
        ([{"step_id": 40, "completion": 0.5, "reason": "another task"}], "is no sampled event of this task"),
    ],
)
def test_completion_answers_that_break_the_rules_are_unavailable(
    wired: Wired, fake_llm: FakeLLM, checkpoints: list[dict[str, Any]], reason: str
) -> None:
    ingest, labeler = wired()
    trace_id, ids = _import(ingest, _session(), fmt="claude_code")
    for point in checkpoints:
        point["step_id"] = ids[point["step_id"]]
    task = {"first_step_id": ids[0], "last_step_id": ids[32], "objective": "Draft beads", "checkpoints": checkpoints}
    rest = {"first_step_id": ids[33], "last_step_id": ids[42], "objective": "Create", "checkpoints": []}
    fake_llm.reply = lambda _path, _body: json.dumps({"task_1": task, "task_2": rest})

    completion = _completion(labeler, trace_id)

    assert completion.unavailable and reason in completion.reason and not completion.tasks


def _one_checkpoint_per_task(_path: str, body: dict[str, Any]) -> str:
    answer = {}
    for field, schema in _tool(body)["input_schema"]["properties"].items():
        bound = {name: schema["properties"][name]["const"] for name in ("first_step_id", "last_step_id")}
        checkpoint = {"step_id": bound["last_step_id"], "completion": 0.5, "reason": "halfway"}
        answer[field] = bound | {"objective": "Refund the order", "checkpoints": [checkpoint]}
    return json.dumps(answer)


def test_concurrent_completion_requests_make_one_generation_and_new_evidence_another(
    wired: Wired, fake_llm: FakeLLM
) -> None:
    ingest, labeler = wired()
    trace = orjson.loads(stash_line("support"))
    trace_id, _steps = _import(ingest, orjson.dumps(trace).decode())
    arrived, release = threading.Event(), threading.Event()

    def held_reply(path: str, body: dict[str, Any]) -> str:
        arrived.set()
        release.wait(30)
        return _one_checkpoint_per_task(path, body)

    fake_llm.reply = held_reply
    results: list[Any] = []
    first = threading.Thread(target=lambda: results.append(_completion(labeler, trace_id)))
    first.start()
    assert arrived.wait(30)
    second = _completion(labeler, trace_id)
    release.set()
    first.join(30)

    assert second.pending and not second.tasks
    assert [point.completion for point in results[0].tasks[0].checkpoints] == [0.5]
    assert _completion(labeler, trace_id) == results[0] and len(fake_llm.requests) == 1

    trace["steps"].append({"role": "user", "content": "Thanks, please also email me the receipt"})
    trace["steps"].append({"role": "assistant", "content": "Sent."})
    _import(ingest, orjson.dumps(trace).decode())
    grown = _completion(labeler, trace_id)

    assert len(fake_llm.requests) == 2 and len(grown.tasks) == 2
