"""Live OpenTelemetry traces: raw spans stored per (owner, trace id, span id), and every trace a
request touches rebuilt from all of its stored spans with the `otel` adapter.

A request is all-or-nothing for what makes the whole request wrong (a body that is not OTLP,
messages that fail to parse): nothing of it is stored. A span whose own ids or times are
unusable is rejected alone and reported through OTLP's partial success. A trace whose spans
hold no LLM messages yet keeps its raw spans but has no trace until an LLM span arrives.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from sqlalchemy.orm import Session

from stash_common.errors import InvalidArgument
from stash_ingest.adapters import otel
from stash_ingest.adapters.reading import load_json
from stash_ingest.imports import ImportRequest, Titler, upsert_traces
from stash_ingest.store import load_otel_spans, save_otel_spans
from stash_ingest.traces import validate_trace

REASONS_SHOWN = 5
SpanKey = tuple[str, str]  # (trace id, span id), lower-case hex


@dataclass(frozen=True)
class OtlpRequest:
    """One OTLP export from an owner: protobuf bytes or OTLP/JSON bytes, and an optional source id."""

    owner_id: str
    protobuf: bytes = b""
    json: bytes = b""
    source_id: str | None = None


@dataclass(frozen=True)
class OtlpResult:
    """What happened: the traces rebuilt, and OTLP's partial-success counts."""

    trace_ids: list[str]
    rejected_spans: int
    error_message: str


def ingest_otlp(session: Session, request: OtlpRequest, titler: Titler) -> OtlpResult:
    """Store the request's spans and rebuild every trace it touched, inside the caller's transaction."""
    accepted, rejected = accept_spans(read_spans(request))
    touched = sorted({trace_id for trace_id, _ in accepted})
    # Earlier spans of the touched traces, read before this request's are written (which override them).
    spans = load_otel_spans(session, request.owner_id, touched)
    stored = {(trace_id, span["spanId"]) for trace_id, earlier in spans.items() for span in earlier}
    for (trace_id, span_id), span in accepted.items():
        spans[trace_id] = [earlier for earlier in spans[trace_id] if earlier["spanId"] != span_id] + [span]
    save_otel_spans(session, request.owner_id, accepted, stored)
    traces = []
    for trace_id, trace_spans in spans.items():
        trace = otel.build_trace(trace_id, trace_spans)
        if trace is not None:
            validate_trace(trace, f"trace {trace_id}")
            traces.append(trace)
    job = ImportRequest(request.owner_id, "otel", b"", request.source_id)
    results = upsert_traces(session, job, "otel", traces, titler)
    message = "; ".join(rejected[:REASONS_SHOWN]) + (" …" if len(rejected) > REASONS_SHOWN else "")
    return OtlpResult([result.trace_id for result in results], len(rejected), message)


def read_spans(request: OtlpRequest) -> Iterable[tuple[str, dict[str, Any]]]:
    """Each span of the request as an OTLP/JSON span dict with its resource and scope, and where it stands."""
    if request.json:
        document = load_json(request.json, "body")
        if not otel.looks_like_otel(document):
            raise InvalidArgument("body", "expected an OTLP/JSON ExportTraceServiceRequest with resourceSpans")
        return otel.spans_of(document, "body")
    try:
        message = ExportTraceServiceRequest.FromString(request.protobuf)
    except DecodeError as error:
        raise InvalidArgument("body", f"is not a protobuf ExportTraceServiceRequest ({error})") from None
    return proto_spans(message)


def proto_spans(request: ExportTraceServiceRequest) -> Iterator[tuple[str, dict[str, Any]]]:
    """The spans of a protobuf request in the OTLP/JSON shape (hex ids), much faster than `json_format`."""
    for i, resource_spans in enumerate(request.resource_spans):
        resource = {"attributes": _attributes(resource_spans.resource.attributes)}
        for j, scope_spans in enumerate(resource_spans.scope_spans):
            scope = scope_spans.scope
            scope_json = {"name": scope.name, "version": scope.version, "attributes": _attributes(scope.attributes)}
            for k, span in enumerate(scope_spans.spans):
                where = f"body: resourceSpans[{i}].scopeSpans[{j}].spans[{k}]"
                yield where, {**_span(span), "resource": resource, "scope": scope_json}


def _span(span: Any) -> dict[str, Any]:
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


def _attributes(items: Any) -> list[dict[str, Any]]:
    return [{"key": item.key, "value": _any_value(item.value)} for item in items]


def _any_value(value: Any) -> dict[str, Any]:
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


_JSON_NAMES = {"double_value": "doubleValue", "bool_value": "boolValue"}


def accept_spans(spans: Iterable[tuple[str, dict[str, Any]]]) -> tuple[dict[SpanKey, dict[str, Any]], list[str]]:
    """The storable spans by key (a re-sent span: the later copy wins), and why each other span was rejected."""
    accepted: dict[SpanKey, dict[str, Any]] = {}
    rejected: list[str] = []
    for where, span in spans:
        try:
            trace_id, span_id = otel.check_span(span, where)
        except InvalidArgument as error:
            rejected.append(str(error))
            continue
        if not trace_id or not span_id:
            rejected.append(f"{where}: a span needs a non-zero traceId and spanId")
            continue
        accepted[trace_id, span_id] = {**span, "traceId": trace_id, "spanId": span_id}  # stored ids: lower hex
    return accepted, rejected
