"""The spans of one trace as read-only views: ids, times, attributes and events decoded once.

A span dict (see `documents`) is what is stored and sent; a `SpanView` is what the readers work on,
so no convention reader touches an OTLP encoding. The views of a trace are put in one order that
does not depend on how the spans arrived (start, end, id, name), because the history merge walks
calls in that order: an export retried out of order must rebuild the same trace. A span sent twice
(a retried export) is kept once, the later copy; spans without an id are numbered `unset-<n>` in
that order. An unfinished or clock-skewed span still becomes a valid interval (end ≥ start).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from stash_common.errors import InvalidArgument
from stash_ingest.adapters.reading import list_or_empty
from stash_ingest.otel.values import any_value, attributes, hex_id, nanos

SPAN_KINDS = ("unspecified", "internal", "server", "client", "producer", "consumer")


@dataclass(frozen=True)
class Event:
    """A span event, or a GenAI log record attached to its span."""

    name: str
    time_ns: int
    fields: dict[str, Any]  # attributes merged with a log record's body


@dataclass(frozen=True)
class SpanView:
    """One span with decoded values, as every reader sees it."""

    id: str
    parent_id: str | None
    name: str
    kind: str | None  # the OTel SpanKind name
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    events: tuple[Event, ...]
    resource: dict[str, Any]


def recorded_kind(attributes: Mapping[str, Any], key: str) -> str | None:
    """The span type an instrumentation recorded under `key`, lower-cased; None when absent or not text."""
    recorded = attributes.get(key)
    return recorded.lower() if isinstance(recorded, str) and recorded else None


def trace_where(trace_id: str) -> str:
    """How errors name a trace: by its hex id, or as the trace with an empty id."""
    return f"trace {trace_id or '(empty trace id)'}"


def span_views(trace_id: str, spans: Sequence[Mapping[str, Any]]) -> list[SpanView]:
    """The views of one trace's span dicts, one per span id, in start order."""
    by_id: dict[str, SpanView] = {}
    unnamed: list[SpanView] = []
    for index, span in enumerate(spans):
        view = _span_view(span, f"{trace_where(trace_id)}: spans[{index}]")
        if view.id:
            by_id[view.id] = view  # a span sent twice (a retried export): the later copy wins
        else:
            unnamed.append(view)
    views = sorted([*by_id.values(), *unnamed], key=lambda view: (view.start_ns, view.end_ns, view.id, view.name))
    numbers = iter(range(len(unnamed)))
    return [view if view.id else replace(view, id=f"unset-{next(numbers)}") for view in views]


def _span_view(span: Any, where: str) -> SpanView:
    if not isinstance(span, Mapping):
        raise InvalidArgument(where, "must be an OTLP/JSON span object")
    span_id = hex_id(span.get("spanId"), f"{where}.spanId")
    parent_id = hex_id(span.get("parentSpanId"), f"{where}.parentSpanId")
    start_ns = nanos(span.get("startTimeUnixNano"), f"{where}.startTimeUnixNano")
    end_ns = nanos(span.get("endTimeUnixNano"), f"{where}.endTimeUnixNano")
    resource = span.get("resource")
    name = span.get("name")
    return SpanView(
        id=span_id,
        parent_id=parent_id if parent_id and parent_id != span_id else None,
        name=name if isinstance(name, str) else "",
        kind=_span_kind_name(span.get("kind")),
        start_ns=start_ns,
        end_ns=max(end_ns, start_ns),
        attributes=attributes(span.get("attributes")),
        events=_events(span.get("events"), where),
        resource=attributes(resource.get("attributes")) if isinstance(resource, Mapping) else {},
    )


def _events(events: Any, where: str) -> tuple[Event, ...]:
    read = [_event(event, f"{where}.events[{index}]") for index, event in enumerate(list_or_empty(events))]
    return tuple(sorted((event for event in read if event), key=lambda event: event.time_ns))


def _event(event: Any, where: str) -> Event | None:
    if not isinstance(event, Mapping) or not isinstance(event.get("name"), str):
        return None
    fields = attributes(event.get("attributes"))
    body = any_value(event.get("body"))
    if isinstance(body, dict):
        fields = {**body, **fields}
    elif isinstance(body, str):
        fields.setdefault("content", body)
    return Event(event["name"], nanos(event.get("timeUnixNano"), f"{where}.timeUnixNano"), fields)


def _span_kind_name(kind: Any) -> str | None:
    if isinstance(kind, int) and not isinstance(kind, bool) and 0 < kind < len(SPAN_KINDS):
        return SPAN_KINDS[kind]
    if isinstance(kind, str) and kind.removeprefix("SPAN_KIND_").lower() in SPAN_KINDS[1:]:
        return kind.removeprefix("SPAN_KIND_").lower()
    return None
