"""Builders of synthetic OTLP/JSON for the OpenTelemetry tests, and the one-trace parse they assert on.

Synthetic documents fill the gaps of the real captures in tests/fixtures/real/otlp; every test that
uses these builders says "synthetic" in its docstring.
"""

from typing import Any

import orjson

from stash_ingest.adapters.otel import parse_otel
from stash_ingest.traces import Trace
from support.traces import only_trace

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
SYSTEM = "You are a support agent. Use the tools you are given."  # the system prompt of the interlingua captures


def attribute(key: str, value: Any) -> dict[str, Any]:
    """An OTLP/JSON key/value attribute."""
    return {"key": key, "value": any_value(value)}


def any_value(value: Any) -> dict[str, Any]:
    """A Python value as an OTLP/JSON AnyValue (ints as decimal strings, as protobuf JSON writes them)."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list):
        return {"arrayValue": {"values": [any_value(item) for item in value]}}
    if isinstance(value, dict):
        return {"kvlistValue": {"values": [attribute(key, item) for key, item in value.items()]}}
    return {"stringValue": value}


def span_dict(span_id: str, start: int, attributes: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    """A client span of the test trace, 500 ns long, with these attributes; `fields` override or add span keys."""
    return {
        "traceId": TRACE_ID,
        "spanId": span_id,
        "name": fields.pop("name", f"span {span_id}"),
        "kind": fields.pop("kind", "SPAN_KIND_CLIENT"),
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + 500),
        "attributes": [attribute(key, value) for key, value in (attributes or {}).items()],
        **fields,
    }


def otlp_document(*spans: dict[str, Any], service: str = "agent") -> dict[str, Any]:
    """An export request holding these spans under one resource with `service.name`."""
    resource = {"attributes": [attribute("service.name", service)]}
    return {
        "resourceSpans": [{"resource": resource, "scopeSpans": [{"scope": {"name": "test"}, "spans": list(spans)}]}]
    }


def chat_span(
    span_id: str, start: int, inputs: list[Any] | orjson.Fragment, outputs: list[Any], **extra: Any
) -> dict[str, Any]:
    """A GenAI `chat` span whose input and output messages are JSON text, the child of span a000000000000001."""
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": orjson.dumps(inputs).decode(),
        "gen_ai.output.messages": orjson.dumps(outputs).decode(),
        **extra,
    }
    return span_dict(span_id, start, attributes, parentSpanId="a000000000000001")


def text_message(role: str, text: str) -> dict[str, Any]:
    """A GenAI message with one text part."""
    return {"role": role, "parts": [{"type": "text", "content": text}]}


def tool_call_message(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """An assistant GenAI message calling one tool."""
    return {"role": "assistant", "parts": [{"type": "tool_call", "id": call_id, "name": name, "arguments": arguments}]}


def tool_result_message(call_id: str, response: Any) -> dict[str, Any]:
    """A tool GenAI message answering one call."""
    return {"role": "tool", "parts": [{"type": "tool_call_response", "id": call_id, "response": response}]}


def log_record(event_name: str, body: dict[str, Any], span_id: str, time: int) -> dict[str, Any]:
    """A GenAI event as a log record (event.name attribute plus body) of a span of the test trace."""
    record = {"timeUnixNano": str(time), "traceId": TRACE_ID, "spanId": span_id, "body": any_value(body)}
    return {**record, "attributes": [attribute("event.name", event_name), attribute("gen_ai.system", "openai")]}


def parse_one(raw: bytes) -> Trace:
    """The one trace `parse_otel` reads from the payload, validated."""
    return only_trace(parse_otel(raw))
