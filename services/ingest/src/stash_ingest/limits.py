"""Size limits of what one import may store, so that every stored trace can be read back quickly.

Structural rules (roles, U+0000, JSON nesting depth) live in `traces.validate_trace`; these limits
are the operator's (IngestSettings, `STASH_INGEST_MAX_*`). Too many traces in one request is 413
(the request is too large as a whole); a trace or field over its limit is 422 naming the trace and
the field, like any other invalid trace, so the caller knows which part to split or shorten.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from stash_common.errors import InvalidArgument, ResourceExhausted
from stash_ingest.traces import Span, Step, Trace


@dataclass(frozen=True)
class TraceLimits:
    """The most one import and one trace may hold; the defaults are IngestSettings' defaults."""

    traces_per_import: int = 10_000
    steps_per_trace: int = 10_000
    spans_per_trace: int = 10_000
    string_chars: int = 1_048_576  # content, titles, tool names, ids
    tool_input_bytes: int = 262_144  # one tool input as compact JSON
    json_bytes: int = 1_048_576  # any other JSON value: metadata, a span's input or output
    trace_bytes: int = 16_777_216  # a whole trace: its strings and JSON values together


DEFAULT_LIMITS = TraceLimits()


def check_import_size(count: int, limits: TraceLimits) -> None:
    """RESOURCE_EXHAUSTED (413) when one request carries more traces than an import may."""
    if count > limits.traces_per_import:
        raise ResourceExhausted(
            f"the payload holds {count} traces; one import may hold at most {limits.traces_per_import}: split it"
        )


def check_trace_limits(trace: Trace, where: str, limits: TraceLimits) -> None:
    """INVALID_ARGUMENT naming the trace and the field that exceeds its limit."""
    _check_count(len(trace.steps), limits.steps_per_trace, f"{where}: steps", "steps")
    _check_count(len(trace.spans), limits.spans_per_trace, f"{where}: spans", "spans")
    total = _string_size(trace.title, f"{where}: title", limits) + _json_size(
        trace.metadata, f"{where}: metadata", limits.json_bytes
    )
    for index, step in enumerate(trace.steps):
        total += _step_size(step, f"{where}: steps[{index}]", limits)
    for index, span in enumerate(trace.spans):
        total += _span_size(span, f"{where}: spans[{index}]", limits)
    if total > limits.trace_bytes:
        raise InvalidArgument(
            where, f"holds {total} bytes of text and JSON; a trace may hold at most {limits.trace_bytes}: split it"
        )


def _check_count(count: int, limit: int, field: str, what: str) -> None:
    if count > limit:
        raise InvalidArgument(field, f"{count} {what} exceed the limit of {limit} per trace: split the trace")


def _step_size(step: Step, where: str, limits: TraceLimits) -> int:
    size = _string_size(step.content, f"{where}.content", limits)
    size += _string_size(step.tool_name, f"{where}.tool_name", limits)
    size += _string_size(step.tool_call_id, f"{where}.tool_call_id", limits)
    size += _json_size(step.tool_input, f"{where}.tool_input", limits.tool_input_bytes)
    return size + _json_size(step.metadata, f"{where}.metadata", limits.json_bytes)


def _span_size(span: Span, where: str, limits: TraceLimits) -> int:
    size = _string_size(span.name, f"{where}.name", limits)
    size += _json_size(span.input, f"{where}.input", limits.json_bytes)
    return size + _json_size(span.output, f"{where}.output", limits.json_bytes)


def _string_size(text: str | None, where: str, limits: TraceLimits) -> int:
    if text is None:
        return 0
    if len(text) > limits.string_chars:
        raise InvalidArgument(where, f"has {len(text)} characters; the limit is {limits.string_chars}")
    return len(text)


def _json_size(value: Any, where: str, limit: int) -> int:
    if value is None:
        return 0
    size = len(orjson.dumps(value, default=dict))  # default: a Mapping that is not a dict
    if size > limit:
        raise InvalidArgument(where, f"is {size} bytes as JSON; the limit is {limit}")
    return size


def check_traces(traces: Sequence[tuple[str, Trace]], limits: TraceLimits) -> None:
    """Every trace of one request, named by where it stands, within the limits."""
    check_import_size(len(traces), limits)
    for where, trace in traces:
        check_trace_limits(trace, where, limits)
