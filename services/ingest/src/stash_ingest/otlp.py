"""Live OpenTelemetry traces: raw spans stored per (owner, trace id, span id), and every trace a
request touches rebuilt from all of its stored spans.

The receiver stores span dicts (`otel.documents`) as they arrive, in OTLP/JSON or protobuf, and
rebuilds with `otel.traces.build_trace`, the same pieces the `otel` import adapter is made of; it
does not go through the adapter, whose rules for a whole file (no LLM spans is an error) differ.

A request is all-or-nothing for what makes the whole request wrong (a body that is not OTLP,
messages that fail to parse): nothing of it is stored. A span whose own ids or times are
unusable is rejected alone and reported through OTLP's partial success. A trace whose spans
hold no LLM messages yet keeps its raw spans but has no trace until an LLM span arrives.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy.orm import Session

from stash_common.errors import InvalidArgument
from stash_ingest.adapters.reading import check_counted, load_json
from stash_ingest.imports import SOURCE_ID_MAX, ImportRequest, Titler, upsert_traces
from stash_ingest.limits import DEFAULT_LIMITS, TraceLimits, check_spans_read, check_traces, check_traces_read
from stash_ingest.otel.documents import COUNTED, SpanDict, SpanKey, check_span, looks_like_otel, spans_of
from stash_ingest.otel.protobuf import proto_spans
from stash_ingest.otel.spans import trace_where
from stash_ingest.otel.traces import build_trace
from stash_ingest.store import load_otel_spans, save_otel_spans
from stash_ingest.traces import check_source_id, validate_trace

REASONS_SHOWN = 5


@dataclass(frozen=True)
class OtlpRequest:
    """One OTLP export from an owner: protobuf bytes or OTLP/JSON bytes, and an optional source id."""

    owner_id: str
    protobuf: bytes = b""
    json: bytes = b""
    source_id: str | None = None
    limits: TraceLimits = DEFAULT_LIMITS


@dataclass(frozen=True)
class OtlpResult:
    """What happened: the traces rebuilt, and OTLP's partial-success counts."""

    trace_ids: list[str]
    rejected_spans: int
    error_message: str


def ingest_otlp(session: Session, request: OtlpRequest, titler: Titler) -> OtlpResult:
    """Store the request's spans and rebuild every trace it touched, inside the caller's transaction."""
    check_source_id(request.source_id, SOURCE_ID_MAX)
    accepted, rejected = accept_spans(read_spans(request), request.limits)
    touched = sorted({trace_id for trace_id, _ in accepted})
    # Earlier spans of the touched traces by span id, read before this request's are written; a span sent again
    # replaces its earlier copy and moves to the end (by id: a long trace's next 512 spans cost 512 lookups).
    spans = {
        trace_id: {span["spanId"]: span for span in earlier}
        for trace_id, earlier in load_otel_spans(session, request.owner_id, touched).items()
    }
    stored = {(trace_id, span_id) for trace_id, earlier in spans.items() for span_id in earlier}
    for (trace_id, span_id), span in accepted.items():
        spans[trace_id].pop(span_id, None)
        spans[trace_id][span_id] = span
    named = []
    for trace_id, by_id in spans.items():
        trace = build_trace(trace_id, list(by_id.values()), request.limits)
        if trace is not None:
            validate_trace(trace, trace_where(trace_id))
            named.append((trace_where(trace_id), trace))
    check_traces(named, request.limits)
    # Written once every touched trace is within the limits: a refused request costs no write.
    save_otel_spans(session, request.owner_id, accepted, stored)
    job = ImportRequest(request.owner_id, "otel", b"", request.source_id)
    results = upsert_traces(session, job, "otel", [trace for _, trace in named], titler)
    message = "; ".join(rejected[:REASONS_SHOWN]) + (" …" if len(rejected) > REASONS_SHOWN else "")
    return OtlpResult([result.trace_id for result in results], len(rejected), message)


def read_spans(request: OtlpRequest) -> Iterable[tuple[str, SpanDict]]:
    """Each span of the request as an OTLP/JSON span dict with its resource and scope, and where it stands; a large
    OTLP/JSON body's spans are counted before it is parsed, a protobuf body's spans decoded one at a time."""
    if request.json:
        check_counted(request.json, COUNTED, "body", request.limits)
        document = load_json(request.json, "body")
        if not looks_like_otel(document):
            raise InvalidArgument("body", "expected an OTLP/JSON ExportTraceServiceRequest with resourceSpans")
        return spans_of(document, "body")
    return proto_spans(request.protobuf, "body", request.limits)


def accept_spans(
    spans: Iterable[tuple[str, SpanDict]], limits: TraceLimits = DEFAULT_LIMITS
) -> tuple[dict[SpanKey, SpanDict], list[str]]:
    """The storable spans by key (a re-sent span: the later copy wins), and why each other span was rejected.

    The traces and each trace's spans are counted as they are accepted: a request over a limit is refused at
    the first span over it, before any trace is built."""
    accepted: dict[SpanKey, SpanDict] = {}
    rejected: list[str] = []
    per_trace: dict[str, int] = {}
    for where, span in spans:
        try:
            trace_id, span_id = check_span(span, where)
        except InvalidArgument as error:
            rejected.append(str(error))
            continue
        if not trace_id or not span_id:
            rejected.append(f"{where}: a span needs a non-zero traceId and spanId")
            continue
        if (trace_id, span_id) not in accepted:
            per_trace[trace_id] = per_trace.get(trace_id, 0) + 1
            check_traces_read(len(per_trace), limits)
            check_spans_read(per_trace[trace_id], trace_where(trace_id), limits)
        accepted[trace_id, span_id] = {**span, "traceId": trace_id, "spanId": span_id}  # stored ids: lower hex
    return accepted, rejected
