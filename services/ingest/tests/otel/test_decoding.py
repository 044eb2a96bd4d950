"""OTLP decoding (stash_ingest.otel.documents, values, spans) on synthetic documents: GenAI log records, id and time
encodings, JSONL lines, and span dicts from opentelemetry-proto messages."""

from __future__ import annotations

import base64

import orjson
from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan

from stash_ingest.otel.documents import group_spans
from stash_ingest.otel.traces import build_trace
from stash_ingest.traces import validate_trace
from support.otlp import (
    TRACE_ID,
    any_value,
    chat_span,
    log_record,
    otlp_document,
    parse_one,
    span_dict,
    text_message,
)
from support.traces import jsonl, tool_calls


def test_parse_otel_attaches_deprecated_log_events_to_their_spans() -> None:
    """Synthetic: resourceLogs records (event.name + body) for a span sent in resourceSpans."""
    call = {"id": "w1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}
    logs = [
        log_record(
            "gen_ai.choice",
            {"index": 0, "finish_reason": "stop", "message": {"content": "Sunny."}},
            "f000000000000007",
            5,
        ),
        log_record("gen_ai.user.message", {"content": "Weather?"}, "f000000000000007", 1),
        log_record("gen_ai.assistant.message", {"tool_calls": [call]}, "f000000000000007", 2),
        log_record("gen_ai.tool.message", {"content": "sunny", "id": "w1"}, "f000000000000007", 3),
        {
            "timeUnixNano": "4",
            "traceId": TRACE_ID,
            "spanId": "f000000000000007",
            "body": any_value("unrelated log line"),
        },
    ]
    document = otlp_document(span_dict("f000000000000007", 1_000, {"gen_ai.operation.name": "chat"}))
    document["resourceLogs"] = [{"resource": {}, "scopeLogs": [{"scope": {}, "logRecords": logs}]}]
    trace = parse_one(orjson.dumps(document))
    assert [(step.role, step.content) for step in trace.steps] == [
        ("user", "Weather?"),
        ("assistant", ""),
        ("tool", "sunny"),
        ("assistant", "Sunny."),
    ]
    assert tool_calls(trace) == [("weather", {"city": "Oslo"}, "w1")]
    assert trace.steps[2].tool_name == "weather"
    assert [span.step_indices for span in trace.spans] == [(0, 1, 2, 3)]


def test_parse_otel_carries_log_events_whose_span_is_absent() -> None:
    """Synthetic: a resourceLogs-only document; the records get a carrier span."""
    logs = [
        log_record("gen_ai.user.message", {"content": "Hi"}, "f000000000000008", 10),
        log_record("gen_ai.choice", {"index": 0, "message": {"content": "Hello"}}, "f000000000000008", 20),
    ]
    document = {"resourceLogs": [{"resource": {}, "scopeLogs": [{"scope": {}, "logRecords": logs}]}]}
    trace = parse_one(orjson.dumps(document))
    assert [step.content for step in trace.steps] == ["Hi", "Hello"]
    (span,) = trace.spans
    assert (span.id, span.name, span.start_ns, span.end_ns) == ("f000000000000008", "gen_ai events", 10, 10)


def test_parse_otel_accepts_base64_ids_number_times_and_integer_enums() -> None:
    """Synthetic: proto3-JSON base64 ids, startTimeUnixNano as a JSON number > 2**53, kind 3."""
    span = chat_span("", 0, [text_message("user", "Hi")], [text_message("assistant", "Hello")])
    span |= {"traceId": base64.b64encode(bytes.fromhex(TRACE_ID)).decode(), "spanId": "AAAAAAAAAAE="}
    span |= {"parentSpanId": "AAAAAAAAAAA=", "startTimeUnixNano": 1788792074027616001, "kind": 3}
    span["endTimeUnixNano"] = 1788792074027616999
    trace = parse_one(orjson.dumps(otlp_document(span)))
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
    raw = jsonl(
        otlp_document(
            chat_span("f000000000000009", 1, [text_message("user", text)], [text_message("assistant", "ok")])
        ),
        otlp_document(),
    )
    assert "\u2028".encode() in raw
    trace = parse_one(raw)
    assert trace.steps[0].content == text


def _proto_request(chat_start: int) -> ExportTraceServiceRequest:
    trace_id, root_id = bytes.fromhex(TRACE_ID), bytes.fromhex("a000000000000001")
    messages = orjson.dumps([text_message("user", "Where is A-1?")]).decode()
    answer = orjson.dumps([text_message("assistant", "Shipped.")]).decode()
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
