"""OTLP protobuf export requests as span dicts, the shape `documents` gives for OTLP/JSON.

Protobuf spans are converted straight into the OTLP/JSON span dict (hex ids, decimal-string times,
AnyValue objects) rather than through `json_format.MessageToDict`: the receiver stores span dicts,
so both wire formats must end in the same shape, and this direct walk is much faster than
`json_format` on the request sizes exporters send. Enums stay integers, which `spans` reads as
OTLP/JSON allows.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Iterator
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from stash_common.errors import InvalidArgument
from stash_ingest.otel.documents import SpanDict

_JSON_NAMES = {"double_value": "doubleValue", "bool_value": "boolValue"}


def parse_request(raw: bytes, where: str) -> ExportTraceServiceRequest:
    """The export request encoded in `raw`; undecodable bytes are an InvalidArgument naming `where`."""
    try:
        return ExportTraceServiceRequest.FromString(raw)
    except DecodeError as error:
        raise InvalidArgument(where, f"is not a protobuf ExportTraceServiceRequest ({error})") from None


def proto_spans(request: ExportTraceServiceRequest) -> Iterator[tuple[str, SpanDict]]:
    """The spans of a protobuf request as span dicts (hex ids), and where each stands."""
    for i, resource_spans in enumerate(request.resource_spans):
        resource = {"attributes": _attributes(resource_spans.resource.attributes)}
        for j, scope_spans in enumerate(resource_spans.scope_spans):
            scope = scope_spans.scope
            scope_json = {"name": scope.name, "version": scope.version, "attributes": _attributes(scope.attributes)}
            for k, span in enumerate(scope_spans.spans):
                where = f"body: resourceSpans[{i}].scopeSpans[{j}].spans[{k}]"
                yield where, {**_span(span), "resource": resource, "scope": scope_json}


def _span(span: Span) -> SpanDict:
    return {
        "traceId": span.trace_id.hex(),
        "spanId": span.span_id.hex(),
        "parentSpanId": span.parent_span_id.hex(),
        "name": span.name,
        "kind": span.kind,
        "startTimeUnixNano": str(span.start_time_unix_nano),
        "endTimeUnixNano": str(span.end_time_unix_nano),
        "attributes": _attributes(span.attributes),
        "events": [
            {"timeUnixNano": str(event.time_unix_nano), "name": event.name, "attributes": _attributes(event.attributes)}
            for event in span.events
        ],
        "status": {"code": span.status.code, "message": span.status.message},
    }


def _attributes(items: Iterable[KeyValue]) -> list[dict[str, Any]]:
    return [{"key": item.key, "value": _any_value(item.value)} for item in items]


def _any_value(value: AnyValue) -> dict[str, Any]:
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return {"stringValue": value.string_value}
    if kind == "int_value":
        return {"intValue": str(value.int_value)}
    if kind == "array_value":
        return {"arrayValue": {"values": [_any_value(item) for item in value.array_value.values]}}
    if kind == "kvlist_value":
        return {"kvlistValue": {"values": _attributes(value.kvlist_value.values)}}
    if kind == "bytes_value":
        return {"bytesValue": base64.b64encode(value.bytes_value).decode()}
    if kind is None:
        return {}
    return {_JSON_NAMES[kind]: getattr(value, kind)}
