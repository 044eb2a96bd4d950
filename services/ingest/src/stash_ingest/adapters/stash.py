"""Stash Trace Format: JSONL, one canonical trace per line. The import format and the export format.

Reading is strict: every JSON type is checked before a dataclass is built, unknown fields are
rejected (a misspelt `tool_inputs` must not vanish silently), and each error names the line and
the field. Span times are decimal strings on the wire because JSON numbers above 2**53 lose
nanoseconds in many parsers; JSON integers are accepted too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import orjson

from stash_common.errors import InvalidArgument
from stash_ingest.adapters.reading import Counted, Records, json_type
from stash_ingest.limits import (
    DEFAULT_LIMITS,
    TraceLimits,
    TraceReader,
    check_records,
    check_spans_read,
    check_steps_read,
)
from stash_ingest.traces import ROLES, Span, Step, Trace

TRACE_FIELDS = ("id", "title", "metadata", "steps", "spans")
STEP_FIELDS = ("role", "content", "tool_name", "tool_input", "tool_call_id", "metadata")
SPAN_FIELDS = ("id", "parent_id", "name", "kind", "start_ns", "end_ns", "input", "output", "step_indices")
_DECIMAL = re.compile(r"[0-9]+")
_KNOWN: dict[tuple[str, ...], frozenset[str]] = {
    fields: frozenset(fields) for fields in (TRACE_FIELDS, STEP_FIELDS, SPAN_FIELDS)
}

# Counted by streaming in a large document: each step, span or array item is at least one of them.
COUNTED: Counted = {"steps.item.role": "steps", "spans.item.id": "spans", "item": "traces"}


def parse_stash(raw: bytes, limits: TraceLimits = DEFAULT_LIMITS) -> list[Trace]:
    """Parse Stash Trace Format JSONL (one trace object per line, or a JSON array of them) into validated traces."""
    records = Records(raw, COUNTED, limits, lines_first=True)
    if not records:
        raise InvalidArgument("payload", "is empty; expected one Stash trace object per line")
    check_records(len(records), limits)
    reader = TraceReader(limits)
    for where, value in records:
        reader.add(_read_trace(value, where, limits), where)
    return reader.traces


def looks_like_stash(value: Any) -> bool:
    """True for an object with a `steps` list whose items carry `role` (the canonical shape)."""
    if not isinstance(value, dict) or not isinstance(value.get("steps"), list):
        return False
    return all(isinstance(step, dict) and "role" in step for step in value["steps"])


def dump_stash(trace: Trace) -> bytes:
    """One trace as one JSON line (no trailing newline); `parse_stash` reads it back to an equal trace."""
    document: dict[str, Any] = {}
    if trace.external_id is not None:
        document["id"] = trace.external_id
    if trace.title is not None:
        document["title"] = trace.title
    if trace.metadata:
        document["metadata"] = trace.metadata
    document["steps"] = [_step_document(step) for step in trace.steps]
    if trace.spans:
        document["spans"] = [_span_document(span) for span in trace.spans]
    return orjson.dumps(document, default=_plain)


def _step_document(step: Step) -> dict[str, Any]:
    document: dict[str, Any] = {"role": step.role, "content": step.content}
    for name in ("tool_name", "tool_input", "tool_call_id"):
        if getattr(step, name) is not None:
            document[name] = getattr(step, name)
    if step.metadata:
        document["metadata"] = step.metadata
    return document


def _span_document(span: Span) -> dict[str, Any]:
    document: dict[str, Any] = {
        "id": span.id,
        "parent_id": span.parent_id,
        "name": span.name,
        "kind": span.kind,
        "start_ns": str(span.start_ns),
        "end_ns": str(span.end_ns),
        "input": span.input,
        "output": span.output,
        "step_indices": list(span.step_indices),
    }
    return {key: value for key, value in document.items() if value is not None}


def _plain(value: Any) -> Any:
    # Frozen dataclasses may hold read-only mappings (MappingProxyType) that orjson cannot write.
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _read_trace(value: Any, where: str, limits: TraceLimits) -> Trace:
    document = _object(value, where, "must be a JSON object with `steps` (one trace per line)")
    prefix = f"{where}: "
    _reject_unknown(document, TRACE_FIELDS, prefix)
    steps = _array(document, "steps", prefix, required=True)
    check_steps_read(len(steps), where, limits)
    spans = _array(document, "spans", prefix, required=False)
    check_spans_read(len(spans), where, limits)
    return Trace(
        steps=tuple(_read_step(step, f"{prefix}steps[{index}]") for index, step in enumerate(steps)),
        external_id=_string(document, "id", prefix),
        title=_string(document, "title", prefix),
        metadata=_mapping(document, "metadata", prefix) or {},
        spans=tuple(_read_span(span, f"{prefix}spans[{index}]") for index, span in enumerate(spans)),
    )


def _read_step(value: Any, at: str) -> Step:
    step = _object(value, at, "must be an object with `role` and `content`")
    prefix = f"{at}."
    _reject_unknown(step, STEP_FIELDS, prefix)
    role = _required_string(step, "role", prefix)
    if role not in ROLES:
        raise InvalidArgument(f"{prefix}role", f"must be one of {', '.join(ROLES)}, not {role!r}")
    return Step(
        role=role,
        content=_required_string(step, "content", prefix),
        tool_name=_string(step, "tool_name", prefix),
        tool_input=_mapping(step, "tool_input", prefix),
        tool_call_id=_string(step, "tool_call_id", prefix),
        metadata=_mapping(step, "metadata", prefix) or {},
    )


def _read_span(value: Any, at: str) -> Span:
    span = _object(value, at, "must be an object with `id`, `name`, `start_ns` and `end_ns`")
    prefix = f"{at}."
    _reject_unknown(span, SPAN_FIELDS, prefix)
    return Span(
        id=_required_string(span, "id", prefix),
        name=_required_string(span, "name", prefix),
        start_ns=_nanoseconds(span, "start_ns", prefix),
        end_ns=_nanoseconds(span, "end_ns", prefix),
        parent_id=_string(span, "parent_id", prefix),
        kind=_string(span, "kind", prefix),
        input=span.get("input"),
        output=span.get("output"),
        step_indices=_step_indices(span, prefix),
    )


def _object(value: Any, at: str, reason: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidArgument(at, f"{reason}, not {json_type(value, show_value=True)}")
    return value


def _reject_unknown(document: dict[str, Any], known: tuple[str, ...], prefix: str) -> None:
    if _KNOWN[known].issuperset(document):
        return
    for key in document:
        if key not in known:
            raise InvalidArgument(f"{prefix}{key}", f"is not a Stash trace field; expected {', '.join(known)}")


def _string(document: dict[str, Any], key: str, prefix: str) -> str | None:
    value = document.get(key)
    if value is not None and not isinstance(value, str):
        raise InvalidArgument(f"{prefix}{key}", f"must be a string, not {json_type(value, show_value=True)}")
    return value


def _required_string(document: dict[str, Any], key: str, prefix: str) -> str:
    value = _string(document, key, prefix)
    if value is None:
        raise InvalidArgument(f"{prefix}{key}", "is required and must be a string")
    return value


def _mapping(document: dict[str, Any], key: str, prefix: str) -> dict[str, Any] | None:
    value = document.get(key)
    if value is not None and not isinstance(value, dict):
        raise InvalidArgument(f"{prefix}{key}", f"must be an object, not {json_type(value, show_value=True)}")
    return value


def _array(document: dict[str, Any], key: str, prefix: str, required: bool) -> list[Any]:
    value = document.get(key)
    if value is None and not required:
        return []
    if not isinstance(value, list):
        raise InvalidArgument(f"{prefix}{key}", f"must be an array, not {json_type(value, show_value=True)}")
    return value


def _nanoseconds(document: dict[str, Any], key: str, prefix: str) -> int:
    value = document.get(key)
    if isinstance(value, str) and _DECIMAL.fullmatch(value):
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    shown = json_type(value, show_value=True)
    raise InvalidArgument(
        f"{prefix}{key}",
        f'must be nanoseconds since the epoch as a decimal string ("1700000000000000000"), not {shown}',
    )


def _step_indices(document: dict[str, Any], prefix: str) -> tuple[int, ...]:
    values = _array(document, "step_indices", prefix, required=False)
    for index, value in enumerate(values):
        if not isinstance(value, int) or isinstance(value, bool):
            shown = json_type(value, show_value=True)
            raise InvalidArgument(f"{prefix}step_indices[{index}]", f"must be an integer, not {shown}")
    return tuple(values)
