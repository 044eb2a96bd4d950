"""The OTLP/JSON adapter: the real captures in tests/fixtures/real/otlp, and synthetic cases for the gaps.

Synthetic documents are built with the helpers at the top (`_attr`, `_span`, `_document`); every test
that uses them says "synthetic" in its docstring.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan

from stash_common.errors import InvalidArgument
from stash_ingest.adapters.otel import build_trace, group_spans, looks_like_otel, parse_otel
from stash_ingest.adapters.reading import first_value, read_records
from stash_ingest.traces import Trace, validate_trace
from support.fixtures import real_fixture

OPENLLMETRY = "otlp/genai-interlingua-openllmetry-0.62.3.json"
OPENINFERENCE = "otlp/genai-interlingua-openinference-openai-0.1.58.json"
OTEL_UTIL = "otlp/genai-interlingua-otel-util-genai-1.1b0.json"
PROTO_EXAMPLE = "otlp/otel-proto-examples-trace.json"
FILE_EXPORTER = "otlp/otel-spec-file-exporter-traces.jsonl"
ALL_FIXTURES = (OPENLLMETRY, OPENINFERENCE, OTEL_UTIL, PROTO_EXAMPLE, FILE_EXPORTER)
INTERLINGUA = (OPENLLMETRY, OPENINFERENCE, OTEL_UTIL)

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
SYSTEM = "You are a support agent. Use the tools you are given."


def _attr(key: str, value: Any) -> dict[str, Any]:
    return {"key": key, "value": _value(value)}


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list):
        return {"arrayValue": {"values": [_value(item) for item in value]}}
    if isinstance(value, dict):
        return {"kvlistValue": {"values": [_attr(key, item) for key, item in value.items()]}}
    return {"stringValue": value}


def _span(span_id: str, start: int, attributes: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    return {
        "traceId": TRACE_ID,
        "spanId": span_id,
        "name": fields.pop("name", f"span {span_id}"),
        "kind": fields.pop("kind", "SPAN_KIND_CLIENT"),
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + 500),
        "attributes": [_attr(key, value) for key, value in (attributes or {}).items()],
        **fields,
    }


def _document(*spans: dict[str, Any], service: str = "agent") -> dict[str, Any]:
    resource = {"attributes": [_attr("service.name", service)]}
    return {
        "resourceSpans": [{"resource": resource, "scopeSpans": [{"scope": {"name": "test"}, "spans": list(spans)}]}]
    }


def _chat(span_id: str, start: int, inputs: list[Any], outputs: list[Any], **extra: Any) -> dict[str, Any]:
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": orjson.dumps(inputs).decode(),
        "gen_ai.output.messages": orjson.dumps(outputs).decode(),
        **extra,
    }
    return _span(span_id, start, attributes, parentSpanId="a000000000000001")


def _text(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": text}]}


def _tool_call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "parts": [{"type": "tool_call", "id": call_id, "name": name, "arguments": arguments}]}


def _tool_result(call_id: str, response: Any) -> dict[str, Any]:
    return {"role": "tool", "parts": [{"type": "tool_call_response", "id": call_id, "response": response}]}


def _jsonl(*documents: dict[str, Any]) -> bytes:
    return b"\n".join(orjson.dumps(document) for document in documents) + b"\n"


def _only(raw: bytes) -> Trace:
    traces = parse_otel(raw)
    assert len(traces) == 1
    validate_trace(traces[0], "test")
    return traces[0]


def _roles(trace: Trace) -> list[str]:
    return [step.role for step in trace.steps]


def _tool_calls(trace: Trace) -> list[tuple[str | None, Any, str | None]]:
    return [(step.tool_name, step.tool_input, step.tool_call_id) for step in trace.steps if step.tool_input is not None]


# ---------------------------------------------------------------- real captures


def test_parse_openllmetry_capture_builds_one_trace_from_two_resource_spans() -> None:
    trace = _only(real_fixture(OPENLLMETRY))
    assert trace.external_id == "77d66be22a4ffc8149309684b3a319f7"
    assert _roles(trace) == ["system", "user", "assistant"]
    assert trace.steps[0].content == SYSTEM
    assert trace.steps[1].content == "Where is order A-1187?"
    assert trace.steps[2].content == ""
    assert trace.steps[2].metadata == {"timestamp": "2026-09-07T13:54:23.838423+00:00"}
    assert trace.metadata == {
        "service_name": "capture",
        "provider": "openai",
        "model": "gpt-4o-mini-2024-07-18",
        "usage": {"input_tokens": 412, "output_tokens": 27, "cache_read_input_tokens": 256},
        "llm_calls": 1,
    }


def test_parse_openllmetry_capture_keeps_the_workflow_span_and_decodes_its_double_encoded_output() -> None:
    workflow, chat = _only(real_fixture(OPENLLMETRY)).spans
    assert (workflow.id, workflow.parent_id, workflow.name, workflow.kind) == (
        "aaa24d5a6cca68bf",
        None,
        "support_triage.workflow",
        "workflow",
    )
    assert workflow.input == {"args": [], "kwargs": {}}
    assert workflow.output["id"] == "chatcmpl-CD8yqQ2y3kZs1o0Wm7bT"
    assert workflow.output["choices"][0]["finish_reason"] == "tool_calls"
    assert workflow.step_indices == ()
    assert (chat.id, chat.parent_id, chat.name, chat.kind) == ("76a26812b532f640", workflow.id, "openai.chat", "llm")
    assert (chat.start_ns, chat.end_ns) == (1788789263812545000, 1788789263838423000)
    assert chat.step_indices == (0, 1, 2)
    assert chat.input[1] == {"role": "user", "parts": [{"content": "Where is order A-1187?", "type": "text"}]}


def test_parse_openinference_capture_reads_flattened_messages_and_tool_calls() -> None:
    trace = _only(real_fixture(OPENINFERENCE))
    assert trace.external_id == "9ed94f9bdc36b397e11c51f77d49e01a"
    assert _roles(trace) == ["system", "user", "assistant"]
    assert trace.steps[1].content == "Where is order A-1187?"
    assert trace.steps[2].metadata == {"timestamp": "2026-09-07T13:25:18.993675+00:00"}
    assert trace.metadata["usage"] == {"input_tokens": 412, "output_tokens": 27, "cache_read_input_tokens": 256}
    assert trace.metadata["model"] == "gpt-4o-mini-2024-07-18"
    (span,) = trace.spans
    assert (span.id, span.name, span.kind, span.step_indices) == (
        "e9856d6fe698c4f2",
        "ChatCompletion",
        "llm",
        (0, 1, 2),
    )
    assert span.input["messages"][1] == {"role": "user", "content": "Where is order A-1187?"}
    assert span.output["choices"][0]["message"]["tool_calls"][0]["id"] == "call_9RtYbK2mXqLp"


def test_parse_otel_util_capture_reads_current_genai_semconv() -> None:
    trace = _only(real_fixture(OTEL_UTIL))
    assert trace.external_id == "053074667b1113278073667614bb3e19"
    assert _roles(trace) == ["system", "user", "assistant"]
    assert trace.steps[2].metadata == {"timestamp": "2026-09-07T14:41:14.047335+00:00"}
    assert trace.metadata == {
        "service_name": "capture",
        "provider": "openai",
        "model": "gpt-4o-mini-2024-07-18",
        "usage": {"input_tokens": 412, "output_tokens": 27},
        "llm_calls": 1,
    }
    (span,) = trace.spans
    assert (span.id, span.parent_id, span.name, span.kind) == ("03491beea3cb073d", None, "chat gpt-4o-mini", "llm")
    assert span.output[0]["finish_reason"] == "tool_calls"


def test_parse_interlingua_captures_yield_the_same_conversation_from_three_instrumentations() -> None:
    traces = [_only(real_fixture(name)) for name in INTERLINGUA]
    expected_call = ("lookup_order", {"order_id": "A-1187"}, "call_9RtYbK2mXqLp")
    for trace in traces:
        assert _roles(trace) == ["system", "user", "assistant"]
        assert [step.content for step in trace.steps] == [SYSTEM, "Where is order A-1187?", ""]
        assert _tool_calls(trace) == [expected_call]


@pytest.mark.parametrize("name", [PROTO_EXAMPLE, FILE_EXPORTER])
def test_parse_otel_rejects_captures_without_llm_spans(name: str) -> None:
    with pytest.raises(InvalidArgument, match=r"resourceSpans: no LLM messages found in any span \(looked for gen_ai"):
        parse_otel(real_fixture(name))


def test_build_trace_returns_none_for_the_official_example_whose_ids_are_upper_case() -> None:
    groups = group_spans([value for _, value in read_records(real_fixture(PROTO_EXAMPLE))])
    assert list(groups) == ["5b8efff798038103d269b633813fc60c"]
    (span,) = groups["5b8efff798038103d269b633813fc60c"]
    assert span["startTimeUnixNano"] == 1544712660000000000  # exact: a float parser would lose nanoseconds
    assert span["resource"]["attributes"][0]["value"] == {"stringValue": "my.service"}
    assert span["scope"]["name"] == "my.library"
    assert build_trace("5b8efff798038103d269b633813fc60c", groups["5b8efff798038103d269b633813fc60c"]) is None


def test_build_trace_returns_none_for_the_file_exporter_lines_with_empty_ids() -> None:
    groups = group_spans([value for _, value in read_records(real_fixture(FILE_EXPORTER))])
    assert list(groups) == [""]
    assert [span["name"] for span in groups[""]] == ["operationA", "operationB"] * 4
    assert build_trace("", groups[""]) is None


def test_build_trace_parses_the_official_example_span_beside_a_synthetic_llm_span() -> None:
    """Synthetic: one LLM span added to the official example's trace, so its spans become a Trace."""
    (span,) = group_spans([orjson.loads(real_fixture(PROTO_EXAMPLE))])["5b8efff798038103d269b633813fc60c"]
    llm = {**_chat("00000000000000aa", 1544712660500000000, [_text("user", "hi")], [_text("assistant", "hello")])}
    llm["traceId"] = "5B8EFFF798038103D269B633813FC60C"
    trace = build_trace("5b8efff798038103d269b633813fc60c", [span, llm])
    assert trace is not None and trace.external_id == "5b8efff798038103d269b633813fc60c"
    server = trace.spans[0]
    assert (server.id, server.parent_id, server.name, server.kind) == (
        "eee19b7ec3c1b174",
        "eee19b7ec3c1b173",
        "I'm a server span",
        "server",
    )
    assert (server.start_ns, server.end_ns, server.input, server.output) == (
        1544712660000000000,
        1544712661000000000,
        None,
        None,
    )
    assert trace.spans[1].step_indices == (0, 1)


def test_build_trace_numbers_spans_with_empty_ids_in_start_order() -> None:
    """Synthetic: an LLM span added to the file-exporter lines (empty trace and span ids, integer status)."""
    documents = [value for _, value in read_records(real_fixture(FILE_EXPORTER))]
    llm = _chat("", 1581452772000000000, [_text("user", "hi")], [_text("assistant", "hello")])
    spans = [*group_spans(documents)[""], {**llm, "name": "chat", "traceId": "", "parentSpanId": ""}]
    trace = build_trace("", spans)
    assert trace is not None and trace.external_id is None
    validate_trace(trace, "test")
    assert [span.id for span in trace.spans] == [f"unset-{n}" for n in range(9)]
    assert trace.spans[0].name == "chat" and trace.spans[0].step_indices == (0, 1)
    assert {span.name for span in trace.spans[1:]} == {"operationA", "operationB"}
    assert all(span.parent_id is None for span in trace.spans)
    assert trace.spans[1].start_ns == 1581452772000000321


# ---------------------------------------------------------------- detection


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_looks_like_otel_accepts_every_capture(name: str) -> None:
    assert looks_like_otel(first_value(real_fixture(name)))


@pytest.mark.parametrize(
    "value",
    [
        {"messages": [{"role": "user", "content": "hi"}]},
        {"steps": [{"role": "user", "content": "hi"}]},
        {"trace": {"id": "t"}, "observations": []},
        {"run_type": "llm", "dotted_order": "x"},
        {"type": "session_meta", "payload": {}},
        {"sessionId": "s", "type": "user"},
        {"resourceSpans": "not a list"},
        [],
        None,
        "resourceSpans",
    ],
)
def test_looks_like_otel_rejects_other_shapes(value: Any) -> None:
    assert not looks_like_otel(value)


# ---------------------------------------------------------------- reconstruction (synthetic)


SUPPORT_HISTORY = [
    _text("system", SYSTEM),
    _text("user", "Where is A-1?"),
    _tool_call("c1", "lookup_order", {"order_id": "A-1"}),
    _tool_result("c1", {"status": "shipped"}),
]
ANSWER = {
    "role": "assistant",
    "parts": [{"type": "reasoning", "content": "It is shipped."}, _text("", "Shipped.")["parts"][0]],
}


def _agent_run() -> list[dict[str, Any]]:
    """An agent span, two calls resending the history around a tool span, a subagent call, a follow-up call."""
    history = SUPPORT_HISTORY
    root = _span("a000000000000001", 500, {"gen_ai.operation.name": "invoke_agent"}, name="invoke_agent", kind=1)
    tool_attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.arguments": '{"order_id": "A-1"}'}
    tool = _span("b000000000000002", 2_000, tool_attributes, parentSpanId=root["spanId"], kind="SPAN_KIND_INTERNAL")
    research = [_text("system", "You research."), _text("user", "Find X")]
    follow_up = [*history, _text("assistant", "Shipped."), _text("user", "Thanks")]
    usage = {"gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 2}
    return [  # children before parents, out of start order
        _chat("b000000000000005", 5_000, follow_up, [_text("assistant", "Welcome")], **usage),
        _chat("b000000000000004", 4_000, research, [_text("assistant", "X found")]),
        tool,
        _chat("b000000000000003", 3_000, history, [ANSWER]),
        _chat("b000000000000001", 1_000, history[:2], [history[2]]),
        root,
    ]


def test_parse_otel_prefix_merges_calls_that_resend_the_growing_history() -> None:
    """Synthetic: calls resend the history; a subagent's independent call keeps its own messages."""
    spans = _agent_run()
    trace = _only(_jsonl(*(_document(span) for span in spans)))
    assert [(step.role, step.content) for step in trace.steps] == [
        ("system", SYSTEM),
        ("user", "Where is A-1?"),
        ("assistant", ""),
        ("tool", '{"status":"shipped"}'),
        ("assistant", "Shipped."),
        ("system", "You research."),
        ("user", "Find X"),
        ("assistant", "X found"),
        ("user", "Thanks"),
        ("assistant", "Welcome"),
    ]
    assert _tool_calls(trace) == [("lookup_order", {"order_id": "A-1"}, "c1")]
    assert (trace.steps[3].tool_name, trace.steps[3].tool_call_id) == ("lookup_order", "c1")
    assert trace.steps[4].metadata == {"reasoning": "It is shipped.", "timestamp": "1970-01-01T00:00:00.000003+00:00"}
    assert "timestamp" not in trace.steps[3].metadata
    assert trace.metadata == {
        "service_name": "agent",
        "usage": {"input_tokens": 10, "output_tokens": 2},
        "llm_calls": 4,
    }


def test_parse_otel_records_every_span_with_the_steps_it_contributed() -> None:
    """Synthetic: the agent run's spans, ordered by start time, with kinds and step indices."""
    trace = _only(_jsonl(*(_document(span) for span in _agent_run())))
    assert [(span.id[-1], span.kind, span.step_indices) for span in trace.spans] == [
        ("1", "agent", ()),
        ("1", "llm", (0, 1, 2)),
        ("2", "tool", ()),
        ("3", "llm", (3, 4)),
        ("4", "llm", (5, 6, 7)),
        ("5", "llm", (8, 9)),
    ]
    assert trace.spans[0].parent_id is None and trace.spans[2].parent_id == "a000000000000001"
    assert trace.spans[2].input == {"order_id": "A-1"}


def test_parse_otel_adds_only_the_new_output_of_a_retried_call() -> None:
    """Synthetic: the same request sent twice (a retry) adds its input once and both outputs."""
    inputs = [_text("user", "Hi")]
    first = _chat("c000000000000001", 1_000, inputs, [_text("assistant", "Hel")])
    retry = _chat("c000000000000002", 2_000, inputs, [_text("assistant", "Hello")])
    trace = _only(orjson.dumps(_document(first, retry)))
    assert [step.content for step in trace.steps] == ["Hi", "Hel", "Hello"]
    assert [span.step_indices for span in trace.spans] == [(0, 1), (2,)]


def test_parse_otel_groups_one_trace_per_trace_id_across_lines() -> None:
    """Synthetic: two traces interleaved over three JSONL lines, returned in first-seen order."""
    a = _chat("d000000000000001", 1_000, [_text("user", "A?")], [_text("assistant", "A.")])
    b = {**_chat("d000000000000002", 1_000, [_text("user", "B?")], [_text("assistant", "B.")]), "traceId": "ff" * 16}
    a_again = _chat(
        "d000000000000003", 2_000, [_text("user", "A?"), _text("assistant", "A."), _text("user", "More")], []
    )
    traces = parse_otel(_jsonl(_document(a), _document(b), _document(a_again)))
    assert [trace.external_id for trace in traces] == [TRACE_ID, "ff" * 16]
    assert [step.content for step in traces[0].steps] == ["A?", "A.", "More"]


def test_build_trace_keeps_one_copy_of_a_span_exported_twice() -> None:
    """Synthetic: a retried export repeats a span; the later copy wins."""
    span = _chat("e000000000000001", 1_000, [_text("user", "Hi")], [_text("assistant", "Hello")])
    trace = build_trace(TRACE_ID, [span, {**span, "name": "renamed"}])
    assert trace is not None and [s.name for s in trace.spans] == ["renamed"]
    assert len(trace.steps) == 2


def test_build_trace_returns_none_for_system_instructions_alone() -> None:
    """Synthetic: a call that recorded only its system instructions is not a conversation yet."""
    span = _span(
        "e000000000000002", 1_000, {"gen_ai.system_instructions": '[{"type": "text", "content": "Be brief."}]'}
    )
    assert build_trace(TRACE_ID, [span]) is None


# ---------------------------------------------------------------- instrumentations and encodings (synthetic)


def test_parse_otel_reads_openinference_indices_as_integers_with_gaps() -> None:
    """Synthetic: OpenInference messages 0..11 without 5 (10 sorts after 9), images, tool calls and results."""
    attributes: dict[str, Any] = {"openinference.span.kind": "LLM"}
    for index in (*range(5), *range(6, 12)):
        attributes[f"llm.input_messages.{index}.message.role"] = "user" if index % 2 == 0 else "assistant"
        attributes[f"llm.input_messages.{index}.message.content"] = f"m{index}"
    image = "llm.input_messages.12.message.contents"
    attributes |= {
        f"{image}.0.message_content.type": "text",
        f"{image}.0.message_content.text": "Look:",
        f"{image}.1.message_content.type": "image",
        f"{image}.1.message_content.image.image.url": "data:image/png;base64,AAAA",
        "llm.input_messages.12.message.role": "user",
        "llm.input_messages.13.message.role": "tool",
        "llm.input_messages.13.message.tool_call_id": "t1",
        "llm.input_messages.13.message.content": "42",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": "Calling.",
        "llm.output_messages.0.message.tool_calls.0.tool_call.id": "t2",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "search",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"q": "x"}',
    }
    trace = _only(orjson.dumps(_document(_span("f000000000000001", 1_000, attributes, kind="SPAN_KIND_INTERNAL"))))
    contents = [step.content for step in trace.steps]
    assert contents[:11] == [f"m{index}" for index in (*range(5), *range(6, 12))]
    assert contents[11:] == ["Look:\n[image]", "42", "Calling.", ""]
    assert _roles(trace)[11:] == ["user", "tool", "assistant", "assistant"]
    assert _tool_calls(trace) == [("search", {"q": "x"}, "t2")]
    assert trace.steps[12].tool_call_id == "t1"


def test_parse_otel_skips_embedding_spans_of_openllmetry() -> None:
    """Synthetic: an OpenLLMetry embeddings span records its input as gen_ai.prompt.0.content; it is no message."""
    embedding = {"llm.request.type": "embedding", "gen_ai.prompt.0.content": "embed me"}
    chat = {"llm.request.type": "chat", "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "Hi"}
    trace = _only(orjson.dumps(_document(_span("f00000000000000b", 1, embedding), _span("f00000000000000c", 2, chat))))
    assert [(step.role, step.content) for step in trace.steps] == [("user", "Hi")]
    assert [span.kind for span in trace.spans] == ["client", "llm"]


def test_parse_otel_skips_openinference_tool_and_chain_spans() -> None:
    """Synthetic: llm.input_messages on a CHAIN span are not read; the LLM span's are."""
    chain = {"openinference.span.kind": "CHAIN", "llm.input_messages.0.message.role": "user"}
    chain["llm.input_messages.0.message.content"] = "ignored"
    llm = {"openinference.span.kind": "LLM", "llm.input_messages.0.message.role": "user"}
    llm["llm.input_messages.0.message.content"] = "read"
    trace = _only(orjson.dumps(_document(_span("f000000000000002", 1, chain), _span("f000000000000003", 2, llm))))
    assert [step.content for step in trace.steps] == ["read"]
    assert [span.kind for span in trace.spans] == ["chain", "llm"]


def test_parse_otel_reads_legacy_openllmetry_indexed_prompts_and_completions() -> None:
    """Synthetic: gen_ai.prompt.N / gen_ai.completion.N with list content as JSON text and tool calls."""
    attributes = {
        "gen_ai.system": "Anthropic",
        "gen_ai.request.model": "claude-x",
        "gen_ai.usage.prompt_tokens": 7,
        "gen_ai.usage.completion_tokens": 3,
        "gen_ai.prompt.0.role": "system",
        "gen_ai.prompt.0.content": "Be brief.",
        "gen_ai.prompt.1.role": "user",
        "gen_ai.prompt.1.content": '[{"type": "text", "text": "Weather?"}]',
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.finish_reason": "tool_call",
        "gen_ai.completion.0.tool_calls.0.id": "w1",
        "gen_ai.completion.0.tool_calls.0.name": "weather",
        "gen_ai.completion.0.tool_calls.0.arguments": '"{\\"city\\": \\"Oslo\\"}"',
    }
    trace = _only(orjson.dumps(_document(_span("f000000000000004", 1_000, attributes))))
    assert [(step.role, step.content) for step in trace.steps] == [
        ("system", "Be brief."),
        ("user", "Weather?"),
        ("assistant", ""),
    ]
    assert _tool_calls(trace) == [("weather", {"city": "Oslo"}, "w1")]
    assert trace.metadata["usage"] == {"input_tokens": 7, "output_tokens": 3}
    assert (trace.metadata["provider"], trace.metadata["model"]) == ("Anthropic", "claude-x")


def test_parse_otel_reads_the_inference_details_event_and_system_instructions() -> None:
    """Synthetic: gen_ai.client.inference.operation.details with structured (not JSON-text) messages."""
    details = {
        "gen_ai.system_instructions": [{"type": "text", "content": "Be brief."}],
        "gen_ai.input.messages": [{"role": "user", "parts": [{"type": "text", "content": "Hi"}]}],
        "gen_ai.output.messages": '[{"role": "assistant", "parts": [{"type": "text", "content": "Hello"}]}]',
    }
    event = {"timeUnixNano": "900", "name": "gen_ai.client.inference.operation.details"}
    event["attributes"] = [_attr(key, value) for key, value in details.items()]
    trace = _only(
        orjson.dumps(_document(_span("f000000000000005", 1_000, {"gen_ai.operation.name": "chat"}, events=[event])))
    )
    assert [(step.role, step.content) for step in trace.steps] == [
        ("system", "Be brief."),
        ("user", "Hi"),
        ("assistant", "Hello"),
    ]


def test_parse_otel_reads_deprecated_per_message_span_events() -> None:
    """Synthetic: gen_ai.system.message / user.message / tool.message / choice as span events."""
    events = [
        {"timeUnixNano": "1", "name": "gen_ai.system.message", "attributes": [_attr("content", "Be brief.")]},
        {"timeUnixNano": "2", "name": "gen_ai.user.message", "attributes": [_attr("content", "Weather?")]},
        {
            "timeUnixNano": "3",
            "name": "gen_ai.tool.message",
            "attributes": [_attr("content", "sunny"), _attr("id", "w0")],
        },
        {
            "timeUnixNano": "4",
            "name": "gen_ai.choice",
            "attributes": [_attr("index", 0), _attr("message", {"content": "Sunny."})],
        },
    ]
    trace = _only(orjson.dumps(_document(_span("f000000000000006", 1_000, {}, events=events))))
    assert [(step.role, step.content) for step in trace.steps] == [
        ("system", "Be brief."),
        ("user", "Weather?"),
        ("tool", "sunny"),
        ("assistant", "Sunny."),
    ]
    assert trace.steps[2].tool_call_id == "w0"


def _log(event_name: str, body: dict[str, Any], span_id: str, time: int) -> dict[str, Any]:
    record = {"timeUnixNano": str(time), "traceId": TRACE_ID, "spanId": span_id, "body": _value(body)}
    return {**record, "attributes": [_attr("event.name", event_name), _attr("gen_ai.system", "openai")]}


def test_parse_otel_attaches_deprecated_log_events_to_their_spans() -> None:
    """Synthetic: resourceLogs records (event.name + body) for a span sent in resourceSpans."""
    call = {"id": "w1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}
    logs = [
        _log(
            "gen_ai.choice",
            {"index": 0, "finish_reason": "stop", "message": {"content": "Sunny."}},
            "f000000000000007",
            5,
        ),
        _log("gen_ai.user.message", {"content": "Weather?"}, "f000000000000007", 1),
        _log("gen_ai.assistant.message", {"tool_calls": [call]}, "f000000000000007", 2),
        _log("gen_ai.tool.message", {"content": "sunny", "id": "w1"}, "f000000000000007", 3),
        {"timeUnixNano": "4", "traceId": TRACE_ID, "spanId": "f000000000000007", "body": _value("unrelated log line")},
    ]
    document = _document(_span("f000000000000007", 1_000, {"gen_ai.operation.name": "chat"}))
    document["resourceLogs"] = [{"resource": {}, "scopeLogs": [{"scope": {}, "logRecords": logs}]}]
    trace = _only(orjson.dumps(document))
    assert [(step.role, step.content) for step in trace.steps] == [
        ("user", "Weather?"),
        ("assistant", ""),
        ("tool", "sunny"),
        ("assistant", "Sunny."),
    ]
    assert _tool_calls(trace) == [("weather", {"city": "Oslo"}, "w1")]
    assert trace.steps[2].tool_name == "weather"
    assert [span.step_indices for span in trace.spans] == [(0, 1, 2, 3)]


def test_parse_otel_carries_log_events_whose_span_is_absent() -> None:
    """Synthetic: a resourceLogs-only document; the records get a carrier span."""
    logs = [
        _log("gen_ai.user.message", {"content": "Hi"}, "f000000000000008", 10),
        _log("gen_ai.choice", {"index": 0, "message": {"content": "Hello"}}, "f000000000000008", 20),
    ]
    document = {"resourceLogs": [{"resource": {}, "scopeLogs": [{"scope": {}, "logRecords": logs}]}]}
    trace = _only(orjson.dumps(document))
    assert [step.content for step in trace.steps] == ["Hi", "Hello"]
    (span,) = trace.spans
    assert (span.id, span.name, span.start_ns, span.end_ns) == ("f000000000000008", "gen_ai events", 10, 10)


def test_parse_otel_accepts_base64_ids_number_times_and_integer_enums() -> None:
    """Synthetic: proto3-JSON base64 ids, startTimeUnixNano as a JSON number > 2**53, kind 3."""
    span = _chat("", 0, [_text("user", "Hi")], [_text("assistant", "Hello")])
    span |= {"traceId": base64.b64encode(bytes.fromhex(TRACE_ID)).decode(), "spanId": "AAAAAAAAAAE="}
    span |= {"parentSpanId": "AAAAAAAAAAA=", "startTimeUnixNano": 1788792074027616001, "kind": 3}
    span["endTimeUnixNano"] = 1788792074027616999
    trace = _only(orjson.dumps(_document(span)))
    assert trace.external_id == TRACE_ID
    (read,) = trace.spans
    assert (read.id, read.parent_id, read.start_ns, read.end_ns) == (
        "0000000000000001",
        None,
        1788792074027616001,
        1788792074027616999,
    )
    assert trace.steps[1].metadata["timestamp"] == "2026-09-07T14:41:14.027616+00:00"


def test_parse_otel_keeps_unicode_line_separators_inside_jsonl_strings() -> None:
    """Synthetic: U+2028 and U+2029 inside a message in file-exporter JSONL stay inside the string."""
    text = "line one\u2028line two\u2029end"
    raw = _jsonl(
        _document(_chat("f000000000000009", 1, [_text("user", text)], [_text("assistant", "ok")])), _document()
    )
    assert "\u2028".encode() in raw
    trace = _only(raw)
    assert trace.steps[0].content == text


def test_parse_otel_replaces_image_data_with_placeholders() -> None:
    """Synthetic: GenAI blob/uri parts never put data into content."""
    parts = [
        {"type": "text", "content": "See"},
        {"type": "blob", "modality": "image", "mime_type": "image/png", "content": "AAAA"},
        {"type": "uri", "modality": "image", "uri": "https://example.com/a.png"},
    ]
    trace = _only(orjson.dumps(_document(_chat("f00000000000000a", 1, [{"role": "user", "parts": parts}], []))))
    assert trace.steps[0].content == "See\n[image]\n[image: https://example.com/a.png]"


def test_parse_otel_is_deterministic() -> None:
    raw = _jsonl(*(_document(span) for span in _agent_run()))
    assert parse_otel(raw) == parse_otel(raw)


# ---------------------------------------------------------------- opentelemetry-proto round trip


def _proto_request(chat_start: int) -> ExportTraceServiceRequest:
    trace_id, root_id = bytes.fromhex(TRACE_ID), bytes.fromhex("a000000000000001")
    messages = orjson.dumps([_text("user", "Where is A-1?")]).decode()
    answer = orjson.dumps([_text("assistant", "Shipped.")]).decode()
    attributes = [
        KeyValue(key="gen_ai.operation.name", value=AnyValue(string_value="chat")),
        KeyValue(key="gen_ai.input.messages", value=AnyValue(string_value=messages)),
        KeyValue(key="gen_ai.output.messages", value=AnyValue(string_value=answer)),
        KeyValue(key="gen_ai.usage.input_tokens", value=AnyValue(int_value=12)),
    ]
    chat = ProtoSpan(
        trace_id=trace_id, span_id=bytes.fromhex("b000000000000001"), parent_span_id=root_id, name="chat m"
    )
    chat.kind = ProtoSpan.SPAN_KIND_CLIENT
    chat.start_time_unix_nano, chat.end_time_unix_nano = chat_start, chat_start + 7
    chat.attributes.extend(attributes)
    resource = Resource(attributes=[KeyValue(key="service.name", value=AnyValue(string_value="shop"))])
    scope_spans = ScopeSpans(scope=InstrumentationScope(name="genai"), spans=[chat])
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(resource=resource, scope_spans=[scope_spans])])


def test_build_trace_accepts_message_to_dict_of_proto_requests() -> None:
    """Synthetic: MessageToDict of an opentelemetry-proto request (base64 ids, camelCase, string int64s)."""
    document = MessageToDict(_proto_request(1788792074027616001))
    assert document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"].endswith("==")
    groups = group_spans([document])
    trace = build_trace(TRACE_ID, groups[TRACE_ID])
    assert trace is not None
    validate_trace(trace, "test")
    assert [step.content for step in trace.steps] == ["Where is A-1?", "Shipped."]
    (span,) = trace.spans
    assert (span.id, span.parent_id, span.kind, span.start_ns) == (
        "b000000000000001",
        "a000000000000001",
        "llm",
        1788792074027616001,
    )
    assert trace.metadata["service_name"] == "shop" and trace.metadata["usage"] == {"input_tokens": 12}


def test_build_trace_rebuilds_from_span_dicts_stored_from_several_requests() -> None:
    """Synthetic: what the live receiver stores (MessageToDict of each Span plus resource and scope)."""
    stored = []
    for request in (_proto_request(3_000), _proto_request(1_000)):
        for resource_spans in request.resource_spans:
            resource = MessageToDict(resource_spans.resource)
            for scope_spans in resource_spans.scope_spans:
                scope = MessageToDict(scope_spans.scope)
                for span in scope_spans.spans:
                    stored.append({**MessageToDict(span), "resource": resource, "scope": scope})
    stored[0]["spanId"] = base64.b64encode(bytes.fromhex("b000000000000002")).decode()
    trace = build_trace(TRACE_ID, stored)
    assert trace is not None
    assert [step.content for step in trace.steps] == ["Where is A-1?", "Shipped.", "Shipped."]
    assert [(span.id, span.step_indices) for span in trace.spans] == [
        ("b000000000000001", (0, 1)),
        ("b000000000000002", (2,)),
    ]


# ---------------------------------------------------------------- errors


def _bad_messages(value: str) -> bytes:
    span = _span("b7ad6b7169203331", 1, {"gen_ai.input.messages": value, "gen_ai.output.messages": "[]"})
    return orjson.dumps(_document(span))


def test_parse_otel_names_trace_span_and_attribute_when_messages_are_not_json() -> None:
    with pytest.raises(
        InvalidArgument, match=rf"trace {TRACE_ID}: span b7ad6b7169203331: gen_ai.input.messages: is not valid JSON"
    ):
        parse_otel(_bad_messages("Where is A-1?"))


def test_parse_otel_rejects_messages_of_the_wrong_shape() -> None:
    with pytest.raises(
        InvalidArgument, match=r"span b7ad6b7169203331: gen_ai.input.messages: must be a JSON list of message objects"
    ):
        parse_otel(_bad_messages('{"role": "user"}'))
    with pytest.raises(InvalidArgument, match=r"gen_ai.input.messages\[0\].parts: must be a list of part objects"):
        parse_otel(_bad_messages('[{"role": "user", "parts": "hi"}]'))
    with pytest.raises(
        InvalidArgument, match=r"gen_ai.input.messages\[0\].role: must be system, user, assistant or tool"
    ):
        parse_otel(_bad_messages('[{"role": "narrator", "parts": []}]'))


def test_parse_otel_names_the_line_of_a_bad_span_id() -> None:
    bad = _chat("not-an-id!", 1, [_text("user", "Hi")], [])
    with pytest.raises(
        InvalidArgument,
        match=r"line 2: resourceSpans\[0\]\.scopeSpans\[0\]\.spans\[0\]\.spanId: must be a hex or base64 id",
    ):
        parse_otel(_jsonl(_document(), _document(bad)))


def test_parse_otel_names_the_location_of_a_bad_timestamp() -> None:
    span = {**_chat("b7ad6b7169203331", 1, [_text("user", "Hi")], []), "startTimeUnixNano": "soon"}
    where = r"document: resourceSpans\[0\]\.scopeSpans\[0\]\.spans\[0\]\.startTimeUnixNano"
    with pytest.raises(InvalidArgument, match=rf"{where}: must be nanoseconds since the epoch"):
        parse_otel(orjson.dumps(_document(span)))


def test_build_trace_names_the_trace_and_span_position_of_a_bad_timestamp() -> None:
    span = {**_chat("b7ad6b7169203331", 1, [_text("user", "Hi")], []), "endTimeUnixNano": "-5"}
    with pytest.raises(InvalidArgument, match=rf"trace {TRACE_ID}: spans\[1\]\.endTimeUnixNano: must be nanoseconds"):
        build_trace(TRACE_ID, [_chat("b7ad6b7169203332", 1, [], []), span])


def test_parse_otel_rejects_a_line_that_is_not_otlp() -> None:
    with pytest.raises(
        InvalidArgument, match=r"line 2: expected an OTLP/JSON object with a resourceSpans or resourceLogs list"
    ):
        parse_otel(_jsonl(_document(), {"messages": []}))


def test_parse_otel_rejects_an_empty_payload() -> None:
    with pytest.raises(InvalidArgument, match=r"payload: is empty"):
        parse_otel(b"\n\n")
