"""The trajectory PRM end to end: stored traces' process patterns, live course corrections, OTLP agents."""

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from support.claude_code import looping_test_session
from support.fixtures import REAL_FIXTURES
from support.stack import RunningStack

WAIT_S = 20
FAILED_TEST = {"action": "test", "target_files": ["tests/test_dates.py"], "success": False, "duration_s": 1.5}


@pytest.fixture(scope="module")
def stack(embedded_stack: RunningStack) -> RunningStack:
    return embedded_stack.for_module("prm")


@pytest.fixture(scope="module")
def other(stack: RunningStack) -> Iterator[httpx.Client]:
    with stack.client(stack.create_user("someone-else")) as client:
        yield client


def _events(api: httpx.Client, task_id: str, *events: dict[str, Any]) -> dict[str, Any]:
    response = api.post(f"/trajectories/{task_id}/events", json={"events": list(events)})
    assert response.status_code == 200, response.text
    return response.json()


def _evaluated(api: httpx.Client, trace_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        detail = api.get(f"/traces/{trace_id}").json()
        if (detail["evaluation"] or {}).get("status") == "succeeded":
            return detail
        time.sleep(0.1)
    raise TimeoutError(f"trace {trace_id} was not evaluated within {WAIT_S}s")


def test_live_events_get_one_correction_per_pattern_per_task(api: httpx.Client) -> None:
    assert _events(api, "task-1", FAILED_TEST, FAILED_TEST) == {"course_correction": None, "patterns": []}

    third = _events(api, "task-1", FAILED_TEST)
    fourth = _events(api, "task-1", FAILED_TEST)

    correction = third["course_correction"]
    assert (correction["pattern"], correction["taxonomy"]) == ("stuck_on_test", "coordination_error")
    assert correction["fingerprint"] == "coordination_error:stuck_on_test"
    assert correction["prompt_block"].startswith("## COURSE CORRECTION")
    assert correction["suggestion"] in correction["prompt_block"]
    assert [pattern["pattern"] for pattern in third["patterns"]] == ["stuck_on_test", "repetition_loop"]
    # The same fingerprint is never given twice to a task; the next most severe new one is.
    assert fourth["course_correction"]["pattern"] == "repetition_loop"
    assert _events(api, "task-1", FAILED_TEST)["course_correction"] is None
    assert api.get("/trajectories/task-1/course-correction").json()["course_correction"]["pattern"] == (
        "repetition_loop"
    )
    assert _events(api, "task-2", FAILED_TEST, FAILED_TEST, FAILED_TEST)["course_correction"]["pattern"] == (
        "stuck_on_test"
    )


def test_corrections_belong_to_their_owner(api: httpx.Client, other: httpx.Client) -> None:
    _events(api, "private-task", FAILED_TEST, FAILED_TEST, FAILED_TEST)

    assert other.get("/trajectories/private-task/course-correction").json() == {"course_correction": None}
    assert api.get("/trajectories/never-seen/course-correction").json() == {"course_correction": None}


@pytest.mark.parametrize(
    ("event", "field"),
    [
        ({"target_files": ["a.py"]}, "action"),
        ({"action": "edit", "duration_s": -1}, "duration_s"),
        ({"action": "edit", "timestamp": "2026-11-30T10:00:00"}, "timestamp"),
    ],
)
def test_a_bad_event_is_422_naming_the_field(api: httpx.Client, event: dict[str, Any], field: str) -> None:
    response = api.post("/trajectories/task-bad/events", json={"events": [event]})

    assert response.status_code == 422
    assert field in response.text


def test_an_empty_event_list_is_422(api: httpx.Client) -> None:
    assert api.post("/trajectories/task-bad/events", json={"events": []}).status_code == 422


def test_a_stored_claude_code_session_that_loops_shows_its_patterns(api: httpx.Client) -> None:
    imported = api.post("/traces/import", json={"format": "claude_code", "data": looping_test_session()})
    trace_id = imported.json()["trace_ids"][0]

    detail = _evaluated(api, trace_id)

    patterns = detail["process_patterns"]
    assert [item["pattern"] for item in patterns] == ["stuck_on_test", "ping_pong", "repetition_loop"]
    stuck = patterns[0]
    assert (stuck["taxonomy"], stuck["severity"], stuck["source"]) == ("coordination_error", 5, "rules")
    assert (stuck["first_step_index"], stuck["last_step_index"]) == (1, 6)
    assert stuck["first_step_id"] == detail["steps"][1]["id"] and stuck["last_step_id"] == detail["steps"][6]["id"]
    assert detail["steps"][1]["tool_name"] == "Bash"
    assert "failed" in stuck["suggestion"]
    listed = api.get("/traces", params={"pattern": "stuck_on_test"}).json()
    assert [trace["id"] for trace in listed["traces"]] == [trace_id] and listed["total"] == 1


def test_a_real_subagent_transcript_that_thrashes(api: httpx.Client) -> None:
    data = (REAL_FIXTURES / "claude-code" / "spotter-v2.1-sidechain-agent-a2898e3.jsonl").read_text(encoding="utf-8")
    trace_id = api.post("/traces/import", json={"format": "claude_code", "data": data}).json()["trace_ids"][0]

    patterns = _evaluated(api, trace_id)["process_patterns"]

    assert [(item["pattern"], item["first_step_index"], item["last_step_index"]) for item in patterns] == [
        ("context_thrash", 2, 11)
    ]
    assert trace_id in [
        trace["id"] for trace in api.get("/traces", params={"pattern": "context_thrash"}).json()["traces"]
    ]


def test_pattern_filter_rejects_unknown_names_and_can_be_empty(api: httpx.Client) -> None:
    assert api.get("/traces", params={"pattern": "expansion_drift"}).json() == {"traces": [], "total": 0}
    response = api.get("/traces", params={"pattern": "nonsense"})
    assert response.status_code == 422 and "pattern" in response.text


def _ping_pong_agent(tracer: Any) -> None:
    """One GenAI chat span whose history reads two files back and forth."""
    history: list[dict[str, Any]] = [{"role": "user", "parts": [{"type": "text", "content": "Why is the build red?"}]}]
    for turn, path in enumerate(["src/a.py", "src/b.py", "src/a.py", "src/b.py"]):
        call = {"type": "tool_call", "id": f"call_{turn}", "name": "read_file", "arguments": {"path": path}}
        history.append({"role": "assistant", "parts": [call]})
        result = {"type": "tool_call_response", "id": f"call_{turn}", "response": f"contents of {path}"}
        history.append({"role": "tool", "parts": [result]})
    answer = [{"role": "assistant", "parts": [{"type": "text", "content": "Still looking."}], "finish_reason": "stop"}]
    with tracer.start_as_current_span("chat gpt-4o-mini") as span:
        span.set_attribute("gen_ai.operation.name", "chat")
        span.set_attribute("gen_ai.request.model", "gpt-4o-mini")
        span.set_attribute("gen_ai.input.messages", json.dumps(history))
        span.set_attribute("gen_ai.output.messages", json.dumps(answer))


def test_an_otlp_agent_can_poll_its_course_correction(stack: RunningStack, key: str, api: httpx.Client) -> None:
    exporter = OTLPSpanExporter(endpoint=f"{stack.api_url}/otel/v1/traces", headers={"authorization": f"Bearer {key}"})
    provider = TracerProvider(resource=Resource.create({"service.name": "coding-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("coding-agent")
    with tracer.start_as_current_span("invoke_agent coder") as root:
        _ping_pong_agent(tracer)
    provider.shutdown()
    otel_trace_id = format(root.get_span_context().trace_id, "032x")

    deadline = time.monotonic() + WAIT_S
    while (found := api.get(f"/trajectories/{otel_trace_id}/course-correction").json())["course_correction"] is None:
        assert time.monotonic() < deadline, "no course correction for the OTLP trace"
        time.sleep(0.2)

    assert found["course_correction"]["pattern"] == "ping_pong"
    assert found["course_correction"]["task_id"] == otel_trace_id
