"""OTLP/JSON documents (an export request or TracesData, or a Collector file-exporter line) as span dicts.

The span dict is the one representation of a span from here on: the OTLP/JSON span object as
written (camelCase keys, exactly what `MessageToDict` of a proto `Span` gives) plus `"resource"`
(the ResourceSpans' `resource` object, `{"attributes": [...]}`) and `"scope"` (the ScopeSpans'
`scope` object). It is self-contained, so the live receiver stores it as it is and rebuilds a
trace from stored span dicts later with the same code the file import uses.

One trace per `traceId` across the whole input: the spans of one trace arrive in several
`resourceSpans` entries and lines, children before parents. Log records from `resourceLogs` that
carry one of the GenAI events (see `conventions.genai`) become events of their span, with their
`body`; a log whose span is not in the input gets a carrier span named "gen_ai events", so
instrumentations that log messages instead of recording them on spans still give a conversation.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from stash_common.errors import InvalidArgument
from stash_ingest.adapters.reading import Counted, Record, count_long_string_items
from stash_ingest.limits import DEFAULT_LIMITS, TraceLimits, check_spans_read, check_steps_read, check_traces_read
from stash_ingest.otel.calls import NOT_LLM_TESTS
from stash_ingest.otel.conventions.genai import GENAI_EVENTS, MESSAGE_ATTRIBUTES
from stash_ingest.otel.spans import trace_where
from stash_ingest.otel.values import attributes, hex_id, nanos

SpanDict = dict[str, Any]  # an OTLP/JSON span plus "resource" and "scope" (see the module docstring)
SpanKey = tuple[str, str]  # (trace id, span id), lower-case hex


def count_spans(data: bytes, spans: Iterator[Any], where: str, limits: TraceLimits) -> None:
    """Spans streamed out of a large document, counted before it is parsed: each trace's spans (by span id), the
    traces, and an LLM call's messages written as long JSON text (each at least one step of its trace) within the
    limits, refused at the first one over. A span whose ids are unusable is left to the reading to report."""
    per_trace: dict[str, set[str]] = {}
    for span in spans:
        try:
            trace_id, span_id = check_span_ids(span, where)
        except InvalidArgument:
            continue
        ids = per_trace.setdefault(trace_id, set())
        ids.add(span_id)
        check_traces_read(len(per_trace), limits)
        check_spans_read(len(ids), trace_where(trace_id), limits)
        check_steps_read(_long_message_count(data, span, limits.steps_per_trace), trace_where(trace_id), limits)


def _long_message_count(data: bytes, span: Mapping[str, Any], most: int) -> int:
    recorded = attributes(span.get("attributes"))
    if any(marks_other(recorded) for marks_other in NOT_LLM_TESTS):
        return 0
    return sum(count_long_string_items(data, recorded.get(key), most) for key in MESSAGE_ATTRIBUTES)


SPANS = "resourceSpans.item.scopeSpans.item.spans.item"
# The spans of an OTLP/JSON document (or of each document of a JSON array), counted before it is parsed.
COUNTED: Counted = {SPANS: count_spans, f"item.{SPANS}": count_spans}


def looks_like_otel(value: Any) -> bool:
    """True for an object with a `resourceSpans` or `resourceLogs` list (an OTLP export request or TracesData)."""
    return isinstance(value, dict) and any(
        isinstance(value.get(key), list) for key in ("resourceSpans", "resourceLogs")
    )


def group_spans(documents: Iterable[Mapping[str, Any]]) -> dict[str, list[SpanDict]]:
    """The span dicts of OTLP/JSON documents by lower-case hex trace id, in input order; GenAI logs attached."""
    return group_records([(f"document {index}", document) for index, document in enumerate(documents)])


def group_records(records: Iterable[Record], limits: TraceLimits = DEFAULT_LIMITS) -> dict[str, list[SpanDict]]:
    """`group_spans` of parsed records, each named by where it was read (`line 3`, `item 0`); the traces and each
    trace's spans are counted as they are grouped, so a payload over a limit stops at the first span over it."""
    groups: dict[str, list[SpanDict]] = {}
    positions: dict[SpanKey, int] = {}
    for where, document in records:
        _check_document(document, where)
        for at, span in spans_of(document, where):
            trace_id, span_id = check_span(span, at)
            spans = groups.setdefault(trace_id, [])
            check_traces_read(len(groups), limits)
            if span_id:
                positions[trace_id, span_id] = len(spans)
            spans.append(span)
            check_spans_read(len(spans), f"trace {trace_id}", limits)
    for where, document in records:
        for at, record, resource in _genai_logs_of(document, where):
            _attach_log(groups, positions, record, resource, at)
    return groups


def check_span(span: Mapping[str, Any], where: str) -> SpanKey:
    """The span's trace and span ids; bad ids or times are reported here, where the line is known."""
    for key in ("startTimeUnixNano", "endTimeUnixNano"):
        nanos(span.get(key), f"{where}.{key}")
    hex_id(span.get("parentSpanId"), f"{where}.parentSpanId")
    return check_span_ids(span, where)


def check_span_ids(span: Any, where: str) -> SpanKey:
    """The span's trace and span ids in lower-case hex; a span that is not an object or has bad ids is refused."""
    if not isinstance(span, Mapping):
        raise InvalidArgument(where, "must be an OTLP/JSON span object")
    return hex_id(span.get("traceId"), f"{where}.traceId"), hex_id(span.get("spanId"), f"{where}.spanId")


def spans_of(document: Mapping[str, Any], where: str) -> Iterable[tuple[str, SpanDict]]:
    """Each span of a document as a span dict (with its resource and scope), and where it stands."""
    for i, resource_spans in _objects(document, "resourceSpans", where):
        at = f"{where}: resourceSpans[{i}]"
        resource = resource_spans.get("resource") or {}
        for j, scope_spans in _objects(resource_spans, "scopeSpans", at):
            scope = scope_spans.get("scope") or {}
            for k, span in _objects(scope_spans, "spans", f"{at}.scopeSpans[{j}]"):
                yield f"{at}.scopeSpans[{j}].spans[{k}]", {**span, "resource": resource, "scope": scope}


def _check_document(document: Any, where: str) -> None:
    if not looks_like_otel(document):
        raise InvalidArgument(where, "expected an OTLP/JSON object with a resourceSpans or resourceLogs list")


def _genai_logs_of(document: Mapping[str, Any], where: str) -> Iterable[tuple[str, dict[str, Any], Any]]:
    for i, resource_logs in _objects(document, "resourceLogs", where):
        at = f"{where}: resourceLogs[{i}]"
        for j, scope_logs in _objects(resource_logs, "scopeLogs", at):
            for k, record in _objects(scope_logs, "logRecords", f"{at}.scopeLogs[{j}]"):
                if _log_event_name(record) in GENAI_EVENTS:
                    yield f"{at}.scopeLogs[{j}].logRecords[{k}]", record, resource_logs.get("resource") or {}


def _objects(container: Mapping[str, Any], key: str, where: str) -> Iterable[tuple[int, dict[str, Any]]]:
    items = container.get(key)
    if items is None:
        return []
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise InvalidArgument(f"{where}.{key}", "must be a list of objects")
    return enumerate(items)


def _log_event_name(record: Mapping[str, Any]) -> str | None:
    name = record.get("eventName") or attributes(record.get("attributes")).get("event.name")
    return name if isinstance(name, str) else None


def _attach_log(
    groups: dict[str, list[SpanDict]],
    positions: dict[SpanKey, int],
    record: Mapping[str, Any],
    resource: Any,
    where: str,
) -> None:
    trace_id = hex_id(record.get("traceId"), f"{where}.traceId")
    span_id = hex_id(record.get("spanId"), f"{where}.spanId")
    time = record.get("timeUnixNano") or record.get("observedTimeUnixNano") or "0"
    nanos(time, f"{where}.timeUnixNano")
    event = {"name": _log_event_name(record), "timeUnixNano": time, "attributes": record.get("attributes") or []}
    spans = groups.setdefault(trace_id, [])
    if (trace_id, span_id) not in positions:
        positions[trace_id, span_id] = len(spans)
        spans.append(_carrier_span(trace_id, span_id, time, resource))
    position = positions[trace_id, span_id]
    span = spans[position]
    spans[position] = {**span, "events": [*(span.get("events") or []), {**event, "body": record.get("body")}]}


def _carrier_span(trace_id: str, span_id: str, time: Any, resource: Any) -> SpanDict:
    """A span for GenAI log records whose own span is not in the input, timed at the first record."""
    timing = {"startTimeUnixNano": time, "endTimeUnixNano": time}
    return {
        "traceId": trace_id,
        "spanId": span_id,
        "name": "gen_ai events",
        **timing,
        "resource": resource,
        "scope": {},
    }
