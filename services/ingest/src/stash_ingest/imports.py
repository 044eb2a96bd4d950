"""Importing traces: parse with an adapter, validate, title, then upsert — all or nothing.

Upserts are by (owner, external id). Re-importing replaces a trace's steps, deleting the
annotations on the old steps; an identical re-import changes nothing. Native transcripts
(Claude Code, Codex) are growing snapshots instead: a longer snapshot appends steps and
keeps the existing step ids and their annotations, a duplicate or older one is a no-op,
and a divergent one is refused with `trace_sync_error`, keeping the stored trace.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sqlalchemy.orm import Session

from stash_common.errors import FailedPrecondition, InvalidArgument
from stash_ingest.adapters.registry import NATIVE_FORMATS, resolve_adapter
from stash_ingest.store import (
    TraceRow,
    delete_steps,
    find_by_external_id,
    load_steps,
    now,
    replace_spans,
    write_steps,
)
from stash_ingest.traces import Step, Trace, validate_trace

# Generates a title for a trace that has none (the fast model, or a derived one).
Titler = Callable[[Trace], str]

SOURCE_ID_MAX = 200


class ImportResult(StrEnum):
    """What an import did to one trace."""

    CREATED = "created"
    REPLACED = "replaced"
    APPENDED = "appended"
    UNCHANGED = "unchanged"


@dataclass(frozen=True)
class ImportedTrace:
    """One trace of an import: its stored id and what happened to it."""

    trace_id: str
    external_id: str | None
    result: ImportResult


@dataclass(frozen=True)
class ImportRequest:
    """An owner's payload in a named format (or `auto`), with an optional explicit source id."""

    owner_id: str
    format: str
    data: bytes
    source_id: str | None = None


class TraceSyncError(FailedPrecondition):
    """A native snapshot that diverges from the stored trace; the stored trace and its review are kept."""

    def __init__(self, external_id: str, position: int) -> None:
        super().__init__(
            f"trace_sync_error: snapshot of {external_id} diverges from the stored trace at step {position}; "
            "the stored trace and its annotations were kept"
        )


def parse_payload(request: ImportRequest) -> tuple[str, list[Trace]]:
    """The format actually used and the validated traces of the payload."""
    if request.source_id is not None and not 1 <= len(request.source_id) <= SOURCE_ID_MAX:
        raise InvalidArgument("source_id", f"must be 1 to {SOURCE_ID_MAX} characters")
    adapter = resolve_adapter(request.format, request.data)
    traces = adapter.parse(request.data)
    if not traces:
        raise InvalidArgument("data", f"no traces found in the {adapter.name} payload")
    for number, trace in enumerate(traces, start=1):
        validate_trace(trace, f"trace {number}" + (f" (id {trace.external_id})" if trace.external_id else ""))
    return adapter.name, traces


def import_traces(session: Session, request: ImportRequest, titler: Titler) -> tuple[str, list[ImportedTrace]]:
    """Parse, validate and upsert every trace of the payload inside the caller's transaction."""
    format_name, traces = parse_payload(request)
    return format_name, [upsert_trace(session, request, format_name, trace, titler) for trace in traces]


def upsert_trace(
    session: Session, request: ImportRequest, format_name: str, trace: Trace, titler: Titler
) -> ImportedTrace:
    """Create the trace, or update the owner's trace with the same external id.

    A trace without a title keeps the stored one, and only a new trace costs a generated title.
    """
    existing = find_by_external_id(session, request.owner_id, trace.external_id) if trace.external_id else None
    if not trace.title:
        title = existing.title if existing is not None and existing.title else titler(trace)
        trace = Trace(trace.steps, trace.external_id, title, trace.metadata, trace.spans)
    if existing is None:
        row = _insert(session, request, format_name, trace)
        return ImportedTrace(row.id, trace.external_id, ImportResult.CREATED)
    if format_name in NATIVE_FORMATS:
        result = _merge_snapshot(session, existing, trace)
    else:
        result = _replace(session, existing, trace)
    _update_header(existing, request, format_name, trace, changed=result is not ImportResult.UNCHANGED)
    return ImportedTrace(existing.id, trace.external_id, result)


def resolve_source_id(metadata: Mapping[str, Any], explicit: str | None, format_name: str) -> str:
    """The explicit source id, else metadata.source_id → agent → source → the format name."""
    if explicit:
        return explicit
    for key in ("source_id", "agent", "source"):
        value = metadata.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()[:SOURCE_ID_MAX]
    return format_name


def _insert(session: Session, request: ImportRequest, format_name: str, trace: Trace) -> TraceRow:
    row = TraceRow(
        owner_id=request.owner_id,
        external_id=trace.external_id,
        title=trace.title or "",
        source_format=format_name,
        source_id=resolve_source_id(trace.metadata, request.source_id, format_name),
        explicit_source_id=request.source_id is not None,
        trace_metadata=dict(trace.metadata),
        revision=1,
        step_count=len(trace.steps),
        listed=True,
        created_at=now(),
        updated_at=now(),
    )
    session.add(row)
    session.flush()
    write_steps(session, row.id, trace.steps)
    replace_spans(session, row.id, trace.spans)
    return row


def _replace(session: Session, row: TraceRow, trace: Trace) -> ImportResult:
    stored = [stored.step for stored in load_steps(session, row.id)]
    if stored == list(trace.steps):
        replace_spans(session, row.id, trace.spans)
        return ImportResult.UNCHANGED
    delete_steps(session, row.id)
    write_steps(session, row.id, trace.steps)
    replace_spans(session, row.id, trace.spans)
    return ImportResult.REPLACED


def _merge_snapshot(session: Session, row: TraceRow, trace: Trace) -> ImportResult:
    stored = [stored.step for stored in load_steps(session, row.id)]
    incoming = list(trace.steps)
    common = _common_prefix(stored, incoming)
    if common < min(len(stored), len(incoming)):
        raise TraceSyncError(row.external_id or row.id, common)
    if len(incoming) <= len(stored):
        return ImportResult.UNCHANGED
    write_steps(session, row.id, incoming[len(stored) :], start=len(stored))
    replace_spans(session, row.id, trace.spans)
    return ImportResult.APPENDED


def _common_prefix(left: Sequence[Step], right: Sequence[Step]) -> int:
    for position, (a, b) in enumerate(zip(left, right, strict=False)):
        if a != b:
            return position
    return min(len(left), len(right))


def _update_header(row: TraceRow, request: ImportRequest, format_name: str, trace: Trace, changed: bool) -> None:
    """Title, metadata, source and revision after an upsert; an earlier explicit source id survives."""
    if request.source_id is not None:
        row.source_id, row.explicit_source_id = request.source_id, True
    elif not row.explicit_source_id:
        row.source_id = resolve_source_id(trace.metadata, None, format_name)
    if not changed:
        return
    row.title = trace.title or row.title
    row.trace_metadata = dict(trace.metadata)
    row.source_format = format_name
    row.step_count = max(row.step_count, len(trace.steps)) if format_name in NATIVE_FORMATS else len(trace.steps)
    row.revision += 1
    row.updated_at = now()
