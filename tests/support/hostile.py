"""Oversized payloads in every import format: one trace of many steps or spans, or many traces.

Each builder writes the smallest valid shape of its format, repeated, so that a payload far over a
limit stays small enough to send (a 1,000,000-step trace is tens of MB). Used by the limit tests and
by bench/hostile_input.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import orjson
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from support.otlp import chat_span, otlp_document, text_message

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"


# An even and an odd number no shape writes otherwise, standing for the item's number in its one dump per parity.
_MARKS = (8_642_097_530, 8_642_097_531)


def _numbered(shape: Callable[[int], Any], count: int) -> list[str]:
    """The JSON text of `shape(n)` for each n below `count`. A million dumps of fresh dicts take seconds each time a
    test builds a payload; this dumps the shape once per parity (roles alternate by it) and writes each n where
    the mark stood, the same text."""
    pieces = [orjson.dumps(shape(mark)).decode().split(str(mark)) for mark in _MARKS]
    return [str(n).join(pieces[n % 2]) for n in range(count)]


def _numbered_array(shape: Callable[[int], Any], count: int) -> orjson.Fragment:
    """The JSON array of `shape(n)` for each n below `count`, written by `_numbered`, for orjson to put in a document
    as it is."""
    return orjson.Fragment("[" + ",".join(_numbered(shape, count)) + "]")


def _numbered_lines(shape: Callable[[int], Any], count: int, *first: Any) -> bytes:
    """JSON lines: the `first` values, then `shape(n)` for each n below `count`, written by `_numbered`."""
    return "\n".join([*(orjson.dumps(value).decode() for value in first), *_numbered(shape, count)]).encode()


def _role(number: int) -> str:
    return "user" if number % 2 == 0 else "assistant"


# --- one trace of `count` steps -----------------------------------------------------------------


def stash_steps(count: int) -> bytes:
    """One Stash trace of `count` steps."""
    return orjson.dumps(
        {"id": "long", "steps": _numbered_array(lambda n: {"role": _role(n), "content": f"s{n}"}, count)}
    )


def openai_steps(count: int) -> bytes:
    """One fine-tuning line of `count` messages."""
    return orjson.dumps({"messages": _numbered_array(lambda n: {"role": _role(n), "content": f"m{n}"}, count)})


def anthropic_steps(count: int) -> bytes:
    """One Anthropic request of `count` messages with a system prompt."""
    messages = _numbered_array(lambda n: {"role": _role(n), "content": [{"type": "text", "text": f"m{n}"}]}, count)
    return orjson.dumps({"system": "You are terse.", "messages": messages})


def otel_steps(count: int) -> bytes:
    """One GenAI span whose input holds `count` messages."""
    messages = _numbered_array(lambda n: text_message(_role(n), f"m{n}"), count)
    return orjson.dumps(otlp_document(chat_span("b000000000000001", 1, messages, [])))


def otlp_protobuf_span(input_messages: str) -> bytes:
    """An OTLP protobuf export request of one chat span whose `gen_ai.input.messages` is this JSON text."""
    attributes = [
        KeyValue(key="gen_ai.operation.name", value=AnyValue(string_value="chat")),
        KeyValue(key="gen_ai.input.messages", value=AnyValue(string_value=input_messages)),
    ]
    span = Span(trace_id=bytes.fromhex(TRACE_ID), span_id=bytes.fromhex("b000000000000001"), attributes=attributes)
    request = ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=[span])])])
    return request.SerializeToString()


def otlp_protobuf_steps(count: int) -> bytes:
    """An OTLP protobuf export of one chat span whose input holds `count` messages (what an exporter sends live)."""
    messages = [text_message(_role(n), f"m{n}") for n in range(count)]
    return otlp_protobuf_span(orjson.dumps(messages).decode())


def otlp_protobuf_spans(count: int) -> bytes:
    """An OTLP protobuf export of one trace of `count` tool spans, each with a 100-character name."""
    spans = [
        Span(
            trace_id=bytes.fromhex(TRACE_ID),
            span_id=(n + 1).to_bytes(8, "big"),
            name="tool " + "x" * 95,
            start_time_unix_nano=n,
            end_time_unix_nano=n + 1,
        )
        for n in range(count)
    ]
    request = ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])])
    return request.SerializeToString()


def otel_spans(count: int) -> bytes:
    """One trace of `count` spans (each a tool span without messages, then one chat span)."""
    spans = [
        {
            "traceId": TRACE_ID,
            "spanId": f"{n + 1:016x}",
            "name": "tool",
            "startTimeUnixNano": str(n),
            "endTimeUnixNano": str(n + 1),
        }
        for n in range(count)
    ]
    return orjson.dumps(otlp_document(*spans, chat_span("f000000000000001", 1, [text_message("user", "hi")], [])))


def langfuse_steps(count: int) -> bytes:
    """One Langfuse trace whose generation's input holds `count` messages."""
    messages = _numbered_array(lambda n: {"role": _role(n), "content": f"m{n}"}, count)
    return orjson.dumps(_langfuse_trace("long", [_generation("g1", messages)]))


def langfuse_observations(count: int) -> bytes:
    """One Langfuse trace of `count` generations (spans), one message each."""
    observations = _numbered_array(lambda n: _generation(f"g{n}", [{"role": "user", "content": f"m{n}"}]), count)
    return orjson.dumps(_langfuse_trace("long", observations))


def langsmith_steps(count: int) -> bytes:
    """One LangSmith llm run whose inputs hold `count` messages."""
    messages = _numbered_array(lambda n: {"role": _role(n), "content": f"m{n}"}, count)
    return orjson.dumps(_langsmith_run("r1", "t1", messages))


def langsmith_runs(count: int) -> bytes:
    """One LangSmith trace of `count` llm runs (spans), one message each."""
    return _numbered_lines(lambda n: _langsmith_run(f"r{n}", "t1", [{"role": "user", "content": f"m{n}"}]), count)


def claude_code_steps(count: int) -> bytes:
    """A Claude Code transcript of `count` alternating user and assistant lines."""
    return _numbered_lines(_claude_line, count)


def codex_steps(count: int) -> bytes:
    """A Codex rollout of `count` alternating user and assistant messages."""
    meta = {"type": "session_meta", "payload": {"id": "session-long", "timestamp": "2026-01-01T00:00:00Z"}}
    return _numbered_lines(_codex_line, count, meta)


# --- `count` traces -----------------------------------------------------------------------------


def stash_traces(count: int) -> bytes:
    """`count` one-step Stash traces."""
    return _numbered_lines(lambda n: {"id": f"t{n}", "steps": [{"role": "user", "content": f"q{n}"}]}, count)


def openai_traces(count: int) -> bytes:
    """`count` one-message fine-tuning lines."""
    return _numbered_lines(lambda n: {"messages": [{"role": "user", "content": f"q{n}"}]}, count)


def anthropic_traces(count: int) -> bytes:
    """`count` one-message Anthropic requests."""
    return _numbered_lines(lambda n: {"system": "s", "messages": [{"role": "user", "content": f"q{n}"}]}, count)


def otel_traces(count: int) -> bytes:
    """One OTLP document of `count` one-span traces."""
    spans = []
    for n in range(count):
        span = chat_span(f"{n + 1:016x}", n, [text_message("user", f"q{n}")], [])
        spans.append({**span, "traceId": f"{n + 1:032x}"})
    return orjson.dumps(otlp_document(*spans))


def langfuse_traces(count: int) -> bytes:
    """A JSON array of `count` one-generation Langfuse traces."""
    return orjson.dumps(
        _numbered_array(
            lambda n: _langfuse_trace(f"t{n}", [_generation(f"g{n}", [{"role": "user", "content": f"q{n}"}])]), count
        )
    )


def langsmith_traces(count: int) -> bytes:
    """`count` one-run LangSmith traces."""
    return _numbered_lines(lambda n: _langsmith_run(f"r{n}", f"t{n}", [{"role": "user", "content": f"q{n}"}]), count)


# --- the shapes --------------------------------------------------------------------------------


def _generation(observation_id: str, messages: list[dict[str, Any]] | orjson.Fragment) -> dict[str, Any]:
    return {
        "id": observation_id,
        "type": "GENERATION",
        "startTime": "2026-01-01T00:00:00Z",
        "input": messages,
        "output": {"role": "assistant", "content": "ok"},
    }


def _langfuse_trace(trace_id: str, observations: list[dict[str, Any]] | orjson.Fragment) -> dict[str, Any]:
    return {"id": trace_id, "timestamp": "2026-01-01T00:00:00Z", "observations": observations}


def _langsmith_run(run_id: str, trace_id: str, messages: list[dict[str, Any]] | orjson.Fragment) -> dict[str, Any]:
    return {
        "id": run_id,
        "trace_id": trace_id,
        "run_type": "llm",
        "start_time": "2026-01-01T00:00:00",
        "inputs": {"messages": messages},
        "outputs": {"generations": [[{"text": "ok", "message": {"role": "assistant", "content": "ok"}}]]},
    }


def _claude_line(number: int) -> dict[str, Any]:
    role = _role(number)
    content: Any = f"q{number}" if role == "user" else [{"type": "text", "text": f"a{number}"}]
    message = {"role": role, "content": content}
    if role == "assistant":
        message["id"] = f"msg_{number}"
    return {"type": role, "sessionId": "session-long", "uuid": f"u{number}", "message": message}


def _codex_line(number: int) -> dict[str, Any]:
    role = _role(number)
    part = "input_text" if role == "user" else "output_text"
    payload = {"type": "message", "role": role, "content": [{"type": part, "text": f"m{number}"}]}
    return {"type": "response_item", "payload": payload}


# Format → builder of one trace of N steps, of one trace of N spans (where a format has spans of its
# own), and of N traces (not for the native formats: one transcript is one trace).
LONG_TRACE: Mapping[str, Callable[[int], bytes]] = {
    "stash": stash_steps,
    "openai_chat": openai_steps,
    "anthropic_messages": anthropic_steps,
    "otel": otel_steps,
    "langfuse": langfuse_steps,
    "langsmith": langsmith_steps,
    "claude_code": claude_code_steps,
    "codex": codex_steps,
}
WIDE_TRACE: Mapping[str, Callable[[int], bytes]] = {
    "otel": otel_spans,
    "langfuse": langfuse_observations,
    "langsmith": langsmith_runs,
}
MANY_TRACES: Mapping[str, Callable[[int], bytes]] = {
    "stash": stash_traces,
    "openai_chat": openai_traces,
    "anthropic_messages": anthropic_traces,
    "otel": otel_traces,
    "langfuse": langfuse_traces,
    "langsmith": langsmith_traces,
}
