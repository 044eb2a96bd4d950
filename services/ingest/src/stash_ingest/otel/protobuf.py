"""OTLP protobuf export requests as span dicts, the shape `documents` gives for OTLP/JSON.

Protobuf spans are converted straight into the OTLP/JSON span dict (hex ids, decimal-string times,
AnyValue objects) rather than through `json_format.MessageToDict`: the receiver stores span dicts,
so both wire formats must end in the same shape, and this direct walk is much faster than
`json_format` on the request sizes exporters send. Enums stay integers, which `spans` reads as
OTLP/JSON allows.

The request is never decoded whole: its wire format is walked down the length-delimited fields that hold
spans (ExportTraceServiceRequest.resource_spans, ResourceSpans.scope_spans, ScopeSpans.spans) and each span
is decoded from its own slice as the receiver asks for it. The receiver counts spans and traces as it
accepts them, so a body over a limit is refused after decoding the spans up to the limit, never the whole
request beside its converted form. A span's large GenAI message texts are counted on the wire before the span is
decoded, as a large OTLP/JSON body's are (`documents.count_spans`), so a span far over the step limit is refused
without building its text.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar, cast

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from stash_common.errors import InvalidArgument
from stash_ingest.adapters.reading import STREAM_FROM, count_buffer_items
from stash_ingest.limits import DEFAULT_LIMITS, TraceLimits, check_steps_read
from stash_ingest.otel.calls import NOT_LLM_TESTS
from stash_ingest.otel.conventions.genai import MESSAGE_ATTRIBUTES
from stash_ingest.otel.documents import SpanDict
from stash_ingest.otel.spans import trace_where
from stash_ingest.otel.values import attributes

_JSON_NAMES = {"double_value": "doubleValue", "bool_value": "boolValue"}


_CORRUPT = "Wire format was corrupt"  # upb's reason for framing it cannot read
# Field numbers of opentelemetry-proto's trace.proto and trace_service.proto.
_RESOURCE_SPANS = 1  # ExportTraceServiceRequest
_RESOURCE, _SCOPE_SPANS = 1, 2  # ResourceSpans
_SCOPE, _SPANS = 1, 2  # ScopeSpans
_TRACE_ID, _SPAN_ID, _ATTRIBUTES = 1, 2, 9  # Span
_KEY, _VALUE = 1, 2  # KeyValue
_STRING_VALUE = 1  # AnyValue
_MESSAGE_KEYS = tuple(key.encode() for key in MESSAGE_ATTRIBUTES)
_VARINT, _FIXED64, _LENGTH_DELIMITED, _FIXED32 = 0, 1, 2, 5

M = TypeVar("M", Span, Resource, InstrumentationScope, KeyValue)


def proto_spans(raw: bytes, where: str, limits: TraceLimits = DEFAULT_LIMITS) -> Iterator[tuple[str, SpanDict]]:
    """The spans of a protobuf export request as span dicts (hex ids), and where each stands, decoded one at a time
    once their large message texts are within the step limit; bytes that are not a request are an InvalidArgument
    naming `where`."""
    request = memoryview(raw)
    for i, resource_spans in enumerate(_repeated(request, _RESOURCE_SPANS, where)):
        resource = {"attributes": _attributes(_singular(Resource, resource_spans, _RESOURCE, where).attributes)}
        for j, scope_spans in enumerate(_repeated(resource_spans, _SCOPE_SPANS, where)):
            scope = _singular(InstrumentationScope, scope_spans, _SCOPE, where)
            scope_json = {"name": scope.name, "version": scope.version, "attributes": _attributes(scope.attributes)}
            for k, span in enumerate(_repeated(scope_spans, _SPANS, where)):
                if len(span) >= STREAM_FROM:  # a smaller span cannot hold a large text
                    _check_long_messages(span, where, limits)
                span_dict = {**_span(_decode(Span, [span], where)), "resource": resource, "scope": scope_json}
                yield f"{where}: resourceSpans[{i}].scopeSpans[{j}].spans[{k}]", span_dict


def _check_long_messages(span: memoryview, where: str, limits: TraceLimits) -> None:
    """The messages of the span's GenAI message texts of STREAM_FROM bytes or more, counted on the wire up to the
    step limit of its trace; a span with unusable ids is left to the receiver to reject, and a span another
    convention marks as no LLM call is not counted, as when it is decoded."""
    trace_id, span_id = (bytes(_last(span, number, where)).hex() for number in (_TRACE_ID, _SPAN_ID))
    items = {bytes(_last(item, _KEY, where)): item for item in _repeated(span, _ATTRIBUTES, where)}
    texts = [_last(_last(items[key], _VALUE, where), _STRING_VALUE, where) for key in _MESSAGE_KEYS if key in items]
    long_texts = [text for text in texts if len(text) >= STREAM_FROM]
    if not long_texts or not trace_id.strip("0") or not span_id.strip("0"):
        return
    others = [_decode(KeyValue, [item], where) for key, item in items.items() if key not in _MESSAGE_KEYS]
    if any(marks_other(attributes(_attributes(others))) for marks_other in NOT_LLM_TESTS):
        return
    count = sum(count_buffer_items(text, limits.steps_per_trace) for text in long_texts)
    check_steps_read(count, trace_where(trace_id), limits)


def _last(message: memoryview, number: int, where: str) -> memoryview:
    """A length-delimited field's last occurrence (the one a decode keeps), or nothing."""
    occurrences = list(_repeated(message, number, where))
    return occurrences[-1] if occurrences else memoryview(b"")


def _repeated(message: memoryview, number: int, where: str) -> Iterator[memoryview]:
    """Each item of a repeated embedded-message field, as a slice of the encoded message, as it is reached."""
    return (message[start:end] for field, start, end in _fields(message, where) if field == number)


def _singular(kind: type[M], message: memoryview, number: int, where: str) -> M:
    """A singular embedded-message field, decoded: it may be written anywhere and more than once (then merged), so
    the whole message is walked, without decoding its other fields."""
    return _decode(
        kind, [message[start:end] for field, start, end in _fields(message, where) if field == number], where
    )


def _decode(kind: type[M], parts: list[memoryview], where: str) -> M:
    """One message from its encoded occurrences (protobuf merges repeats of a singular field as if concatenated)."""
    try:
        # upb reads any buffer (the stubs say bytes): one part is decoded in place, without copying it first.
        return kind.FromString(cast(bytes, parts[0]) if len(parts) == 1 else b"".join(parts))
    except DecodeError as error:
        # upb names the message that failed (a span); the answer names the request, as the whole decode did.
        raise _not_a_request(where, str(error).rpartition("': ")[2]) from None


def _not_a_request(where: str, reason: str = _CORRUPT) -> InvalidArgument:
    request_type = ExportTraceServiceRequest.DESCRIPTOR.full_name
    return InvalidArgument(
        where,
        f"is not a protobuf ExportTraceServiceRequest (Error parsing message with type '{request_type}': {reason})",
    )


def _fields(message: memoryview, where: str) -> Iterator[tuple[int, int, int]]:
    """The number, start and end of each length-delimited field of one encoded message, in wire order; the other
    fields are skipped, and an encoding that does not end where the message does is an InvalidArgument."""
    position = 0
    while position < len(message):
        tag, position = _varint(message, position, where)
        wire_type = tag & 7
        if wire_type == _VARINT:
            _, position = _varint(message, position, where)
        elif wire_type in (_FIXED64, _FIXED32):
            position += 8 if wire_type == _FIXED64 else 4
        elif wire_type == _LENGTH_DELIMITED:
            size, position = _varint(message, position, where)
            if position + size > len(message):
                raise _not_a_request(where)
            yield tag >> 3, position, position + size
            position += size
        else:  # groups: deprecated, never written for these messages
            raise _not_a_request(where)
    if position != len(message):
        raise _not_a_request(where)


def _varint(message: memoryview, position: int, where: str) -> tuple[int, int]:
    """The base-128 varint at `position`, and the position after it."""
    value, shift = 0, 0
    while position < len(message) and shift < 64:
        byte = message[position]
        value |= (byte & 0x7F) << shift
        position += 1
        if byte < 0x80:
            return value, position
        shift += 7
    raise _not_a_request(where)


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
