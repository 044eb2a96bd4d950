"""Size limits of what one import may store, so that every stored trace can be read back quickly.

Structural rules (roles, U+0000, JSON nesting depth) live in `traces.validate_trace`; these limits
are the operator's (IngestSettings, `STASH_INGEST_MAX_*`). Too many traces in one request is 413
(the request is too large as a whole); a trace or field over its limit is 422 naming the trace and
the field, like any other invalid trace, so the caller knows which part to split or shorten.

The limits are applied while a payload is read, not after: an adapter counts a trace's steps and
spans as it builds them and stops at the first one over the limit, checks each trace as soon as it
is built (`TraceReader`), and stops at the first trace over the import's limit. So an input far over
a limit is refused after reading about as much as the limit allows, in time and memory bounded by
the limits rather than by the input.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from stash_common.errors import InvalidArgument, ResourceExhausted
from stash_ingest.traces import Span, Step, Trace, validate_trace


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
            f"the payload holds {count} traces; one import may hold at most {limits.traces_per_import} traces: split it"
        )


def check_records(count: int, limits: TraceLimits) -> None:
    """RESOURCE_EXHAUSTED before reading, when a payload has more records (lines, array items) than an import may
    hold traces, in a format where every record is at least one trace."""
    if count > limits.traces_per_import:
        raise ResourceExhausted(
            f"the payload holds {count} records of at least one trace each; one import may hold at most "
            f"{limits.traces_per_import} traces: split it"
        )


def check_traces_read(count: int, limits: TraceLimits) -> None:
    """While a payload is read: RESOURCE_EXHAUSTED (413) as soon as it holds more traces than an import may."""
    limit = limits.traces_per_import
    if count > limit:
        raise ResourceExhausted(
            f"the payload holds more than {limit} traces; one import may hold at most {limit} traces: split it"
        )


def check_steps_read(count: int, where: str, limits: TraceLimits) -> None:
    """While a trace is built: INVALID_ARGUMENT as soon as it has more steps than a trace may hold."""
    if count > limits.steps_per_trace:
        raise InvalidArgument(f"{where}: steps", _over_while_reading("steps", limits.steps_per_trace))


def check_spans_read(count: int, where: str, limits: TraceLimits) -> None:
    """While a trace is built: INVALID_ARGUMENT as soon as it has more spans than a trace may hold."""
    if count > limits.spans_per_trace:
        raise InvalidArgument(f"{where}: spans", _over_while_reading("spans", limits.spans_per_trace))


def _over_while_reading(what: str, limit: int) -> str:
    return f"{what} exceed the limit of {limit} per trace (reading stopped at the first one over it): split the trace"


@dataclass
class TraceReader:
    """The traces an adapter reads from one payload: each validated and checked against the limits as soon as it
    is built, and the import refused (413) as soon as it holds one trace too many."""

    limits: TraceLimits
    traces: list[Trace] = field(default_factory=list)

    def add(self, trace: Trace, where: str) -> None:
        """Accept one more trace read at `where`; a trace over a limit is 422 naming it and its field."""
        check_traces_read(len(self.traces) + 1, self.limits)
        validate_trace(trace, where)
        check_trace_limits(trace, where, self.limits)
        self.traces.append(trace)


def check_trace_limits(trace: Trace, where: str, limits: TraceLimits) -> None:
    """INVALID_ARGUMENT naming the trace and the field that exceeds its limit."""
    _check_count(len(trace.steps), limits.steps_per_trace, f"{where}: steps", "steps")
    _check_count(len(trace.spans), limits.spans_per_trace, f"{where}: spans", "spans")
    total = _string_size(trace.title, where, ": title", limits)
    total += _json_size(trace.metadata, where, ": metadata", limits.json_bytes)
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
    size = _string_size(step.content, where, ".content", limits)
    size += _string_size(step.tool_name, where, ".tool_name", limits)
    size += _string_size(step.tool_call_id, where, ".tool_call_id", limits)
    size += _json_size(step.tool_input, where, ".tool_input", limits.tool_input_bytes)
    return size + _json_size(step.metadata, where, ".metadata", limits.json_bytes)


def _span_size(span: Span, where: str, limits: TraceLimits) -> int:
    size = _string_size(span.name, where, ".name", limits)
    size += _json_size(span.input, where, ".input", limits.json_bytes)
    return size + _json_size(span.output, where, ".output", limits.json_bytes)


# `where` and `field` are joined only to name a value over its limit: building each name up front was a tenth of
# checking a trace.
def _string_size(text: str | None, where: str, field: str, limits: TraceLimits) -> int:
    if text is None:
        return 0
    if len(text) > limits.string_chars:
        raise InvalidArgument(where + field, f"has {len(text)} characters; the limit is {limits.string_chars}")
    return len(text)


def _json_size(value: Any, where: str, field: str, limit: int) -> int:
    if value is None:
        return 0
    size = len(orjson.dumps(value, default=dict))  # default: a Mapping that is not a dict
    if size > limit:
        raise InvalidArgument(where + field, f"is {size} bytes as JSON; the limit is {limit}")
    return size


def check_traces(traces: Sequence[tuple[str, Trace]], limits: TraceLimits) -> None:
    """Every trace of one request, named by where it stands, within the limits."""
    check_import_size(len(traces), limits)
    for where, trace in traces:
        check_trace_limits(trace, where, limits)
