"""The canonical Stash Trace: what every adapter produces, what is stored and exported.

A `Trace` here is parsed input, before it has an owner or ids. Validation follows the
spec's rules (roles, content strings, object-valued tool inputs and metadata, span ids,
parents, times and step references) and names the trace and the field that is wrong.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from stash_common.errors import InvalidArgument
from stash_common.text_checks import check_storable, check_storable_json, plainly_storable_json

ROLES: tuple[str, ...] = ("system", "user", "assistant", "tool")
MAX_NANOSECONDS = 2**63 - 1  # a signed 64-bit column, like OTLP's fixed64 read as signed
# JSON values (tool inputs, metadata, span inputs and outputs) travel as protobuf Structs, and a
# GetTraceResponse nested past about 30 JSON levels exceeds protobuf's decoding depth: refused at import
# with a margin, so that nothing is stored that cannot be read back.
MAX_JSON_DEPTH = 20


@dataclass(frozen=True)
class Step:
    """One message or tool call of a conversation, in recorded order."""

    role: str
    content: str
    tool_name: str | None = None
    tool_input: Mapping[str, Any] | None = None
    tool_call_id: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Span:
    """A timed operation (an LLM call, a tool run, a subagent), independent of the steps."""

    id: str
    name: str
    start_ns: int
    end_ns: int
    parent_id: str | None = None
    kind: str | None = None
    input: Any = None
    output: Any = None
    step_indices: tuple[int, ...] = ()


@dataclass(frozen=True)
class Trace:
    """One agent run in the canonical format; `external_id` identifies it for re-imports."""

    steps: tuple[Step, ...]
    external_id: str | None = None
    title: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    spans: tuple[Span, ...] = ()


def validate_trace(trace: Trace, where: str) -> None:
    """Raise InvalidArgument naming `where` (a line or trace position) and the field at fault."""
    if trace.external_id is not None and not 1 <= len(trace.external_id) <= 500:
        raise InvalidArgument(f"{where}: id", "must be 1 to 500 characters")
    check_storable(trace.external_id, f"{where}: id")
    check_storable(trace.title, f"{where}: title")
    if not _is_mapping(trace.metadata):
        raise InvalidArgument(f"{where}: metadata", "must be an object")
    check_json_storable(trace.metadata, f"{where}: metadata")
    if not trace.steps:
        raise InvalidArgument(f"{where}: steps", "a trace needs at least one step")
    for index, step in enumerate(trace.steps):
        validate_step(step, f"{where}: steps[{index}]")
    if all(step.role == "system" for step in trace.steps):
        raise InvalidArgument(f"{where}: steps", "a trace with only system steps has nothing to review")
    validate_spans(trace.spans, len(trace.steps), where)


def validate_step(step: Step, where: str) -> None:
    """One step's role, content and optional fields."""
    if _plainly_valid(step):
        return  # the common case, checked without naming each field (a fifth of parsing an import)
    if step.role not in ROLES:
        raise InvalidArgument(f"{where}.role", f"must be one of {', '.join(ROLES)}, not {step.role!r}")
    if not isinstance(step.content, str):
        raise InvalidArgument(f"{where}.content", "must be a string")
    if step.tool_input is not None and not _is_mapping(step.tool_input):
        raise InvalidArgument(f"{where}.tool_input", "must be an object")
    check_json_storable(step.tool_input, f"{where}.tool_input")
    for name in ("tool_name", "tool_call_id"):
        value = getattr(step, name)
        if value is not None and not isinstance(value, str):
            raise InvalidArgument(f"{where}.{name}", "must be a string")
        check_storable(value, f"{where}.{name}")
    check_storable(step.content, f"{where}.content")
    if not _is_mapping(step.metadata):
        raise InvalidArgument(f"{where}.metadata", "must be an object")
    check_json_storable(step.metadata, f"{where}.metadata")


def _plainly_valid(step: Step) -> bool:
    """Whether `validate_step` would accept the step, for plain values: strings and dicts (anything else is judged
    and named by the checks)."""
    return (
        step.role in ROLES
        and _plain_text(step.content)
        and (step.tool_name is None or _plain_text(step.tool_name))
        and (step.tool_call_id is None or _plain_text(step.tool_call_id))
        and (step.tool_input is None or type(step.tool_input) is dict)
        and plainly_storable_json(step.tool_input, MAX_JSON_DEPTH)
        and type(step.metadata) is dict
        and plainly_storable_json(step.metadata, MAX_JSON_DEPTH)
    )


def _plain_text(value: Any) -> bool:
    return type(value) is str and "\x00" not in value


def _is_mapping(value: Any) -> bool:
    # A dict first: the Mapping check goes through the ABC machinery, a measurable cost per step of an import.
    return type(value) is dict or isinstance(value, Mapping)


def check_source_id(source_id: str | None, max_chars: int) -> None:
    """An explicit source id (import field or OTLP header): 1 to `max_chars` characters, no U+0000."""
    if source_id is not None and not 1 <= len(source_id) <= max_chars:
        raise InvalidArgument("source_id", f"must be 1 to {max_chars} characters")
    check_storable(source_id, "source_id")


def check_json_storable(value: Any, where: str) -> None:
    """A JSON value's strings and keys free of U+0000 (PostgreSQL's json and text refuse it), nested at most
    MAX_JSON_DEPTH levels; the error names the path inside the value (`tool_input.query[2]`)."""
    check_storable_json(value, where, MAX_JSON_DEPTH)


def validate_spans(spans: Sequence[Span], step_count: int, where: str) -> None:
    """Unique ids, no parent cycles, end ≥ start, existing step indices; absent parents are allowed."""
    by_id: dict[str, Span] = {}
    for index, span in enumerate(spans):
        at = f"{where}: spans[{index}]"
        if not span.id:
            raise InvalidArgument(f"{at}.id", "must be a non-empty string")
        for name in ("id", "name", "parent_id", "kind"):
            check_storable(getattr(span, name), f"{at}.{name}")
        check_json_storable(span.input, f"{at}.input")
        check_json_storable(span.output, f"{at}.output")
        if span.id in by_id:
            raise InvalidArgument(f"{at}.id", f"duplicate span id {span.id!r}")
        for name in ("start_ns", "end_ns"):
            if not 0 <= getattr(span, name) <= MAX_NANOSECONDS:
                raise InvalidArgument(f"{at}.{name}", "must be 0 to 2**63-1 nanoseconds since the Unix epoch")
        if span.end_ns < span.start_ns:
            raise InvalidArgument(f"{at}.end_ns", "must not precede start_ns")
        for step_index in span.step_indices:
            if not 0 <= step_index < step_count:
                raise InvalidArgument(f"{at}.step_indices", f"step {step_index} does not exist")
        by_id[span.id] = span
    for index, span in enumerate(spans):
        if _has_cycle(span, by_id):
            raise InvalidArgument(f"{where}: spans[{index}].parent_id", f"span {span.id!r} is its own ancestor")


def _has_cycle(span: Span, by_id: Mapping[str, Span]) -> bool:
    seen = {span.id}
    parent = span.parent_id
    while parent is not None and parent in by_id:
        if parent in seen:
            return True
        seen.add(parent)
        parent = by_id[parent].parent_id
    return False


@dataclass(frozen=True)
class StoredStep:
    """A step as stored: its own id and zero-based index within the trace."""

    id: str
    index: int
    step: Step


@dataclass(frozen=True)
class TraceSummary:
    """What the trace list shows: identity, source, size and annotation counts."""

    id: str
    owner_id: str
    external_id: str | None
    title: str
    source_format: str
    source_id: str
    source_name: str
    step_count: int
    positive_count: int
    negative_count: int
    comment_count: int
    label_error_count: int
    revision: int
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class StoredTrace:
    """A stored trace with its steps and spans, in order."""

    summary: TraceSummary
    metadata: Mapping[str, Any]
    steps: tuple[StoredStep, ...]
    spans: tuple[Span, ...]

    def canonical(self) -> Trace:
        """The trace in the canonical format, as exported; the source id travels in metadata."""
        metadata = {**self.metadata, "source_id": self.summary.source_id}
        return Trace(
            steps=tuple(stored.step for stored in self.steps),
            external_id=self.summary.external_id,
            title=self.summary.title,
            metadata=metadata,
            spans=self.spans,
        )
