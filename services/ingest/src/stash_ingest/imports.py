"""Importing traces: parse with an adapter, validate, title, then upsert — all or nothing.

Upserts are by (owner, external id). Re-importing replaces a trace's steps, deleting the
annotations on the old steps; an identical re-import changes nothing. Native transcripts
(Claude Code, Codex) are growing snapshots instead: a longer snapshot appends steps and
keeps the existing step ids and their annotations, a duplicate or older one is a no-op,
and a divergent one is refused with `trace_sync_error`, keeping the stored trace.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from sqlalchemy.orm import Session

from stash_common.db import new_id, utc_now
from stash_common.errors import FailedPrecondition, InvalidArgument
from stash_ingest.adapters.registry import AUTO, NATIVE_FORMATS, detect, resolve_adapter
from stash_ingest.limits import DEFAULT_LIMITS, TraceLimits
from stash_ingest.store import (
    TraceRow,
    delete_steps,
    find_by_external_ids,
    find_trace_row,
    insert_traces,
    load_steps_by_trace,
    replace_spans,
    save_source_name,
    source_names,
    write_steps,
)
from stash_ingest.traces import Span, Step, Trace, check_source_id

# Generates a title for a trace that has none (the fast model, or a derived one).
Titler = Callable[[Trace], str]

SOURCE_ID_MAX = 200
SOURCE_NAME_MAX = 120
AGENT_NAMES = {"claude_code": "Claude Code", "codex": "Codex"}


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
    limits: TraceLimits = DEFAULT_LIMITS


class TraceSyncError(FailedPrecondition):
    """A native snapshot that diverges from the stored trace; the stored trace and its review are kept."""

    def __init__(self, external_id: str, position: int) -> None:
        super().__init__(
            f"trace_sync_error: snapshot of {external_id} diverges from the stored trace at step {position}; "
            "the stored trace and its annotations were kept"
        )


def parse_payload(request: ImportRequest) -> tuple[str, list[Trace]]:
    """The format actually used and the traces of the payload, validated and within the limits as they were read."""
    check_source_id(request.source_id, SOURCE_ID_MAX)
    adapter = resolve_adapter(request.format, request.data, request.limits)
    traces = adapter.parse(request.data, request.limits)
    if not traces:
        raise InvalidArgument("data", f"no traces found in the {adapter.name} payload")
    return adapter.name, traces


def import_traces(session: Session, request: ImportRequest, titler: Titler) -> tuple[str, list[ImportedTrace]]:
    """Parse, validate and upsert every trace of the payload inside the caller's transaction."""
    format_name, traces = parse_payload(request)
    return format_name, upsert_traces(session, request, format_name, traces, titler)


def upload_transcript(
    session: Session, request: ImportRequest, titler: Titler, owner_name: str
) -> tuple[str, ImportedTrace]:
    """One native agent transcript (Claude Code or Codex) as a growing snapshot of one trace; its source,
    when it has no saved name yet, is named after the agent and the owner."""
    agent = _native_agent(request.format or AUTO, request.data)
    format_name, imported = import_traces(session, replace(request, format=agent), titler)
    if len(imported) != 1:
        raise InvalidArgument("data", f"expected one {agent} transcript, found {len(imported)} traces")
    if owner_name:
        _name_source(session, request.owner_id, imported[0].trace_id, f"{AGENT_NAMES[agent]} ({owner_name})")
    return format_name, imported[0]


def _name_source(session: Session, owner_id: str, trace_id: str, name: str) -> None:
    source_id = find_trace_row(session, owner_id, trace_id).source_id
    if source_id not in source_names(session, owner_id):
        save_source_name(session, owner_id, source_id, name[:SOURCE_NAME_MAX])


def _native_agent(agent: str, data: bytes) -> str:
    """The named or detected native format; anything else is sent to the supported import or OpenTelemetry."""
    elsewhere = (
        "upload other formats with POST /api/v1/rm/traces/import or send OpenTelemetry to /api/v1/rm/otel/v1/traces"
    )
    supported = ", ".join([*sorted(NATIVE_FORMATS), AUTO])
    if agent != AUTO and agent not in NATIVE_FORMATS:
        raise InvalidArgument(
            "agent", f"{agent!r} is not a native agent transcript (supported: {supported}); {elsewhere}"
        )
    if agent != AUTO:
        return agent
    try:
        detected = detect(data)
    except InvalidArgument:
        raise InvalidArgument("data", f"not a Claude Code or Codex transcript; {elsewhere}") from None
    if detected not in NATIVE_FORMATS:
        raise InvalidArgument("data", f"a {detected} payload is not a native agent transcript; {elsewhere}")
    return detected


@dataclass
class _Writes:
    """What a batch of upserts writes, collected so each table gets one statement per batch."""

    created: list[TraceRow] = field(default_factory=list)  # new rows, in their final state once the batch is planned
    steps: dict[str, tuple[int, Sequence[Step]]] = field(default_factory=dict)  # trace id → (first position, steps)
    spans: dict[str, Sequence[Span]] = field(default_factory=dict)
    cleared: set[str] = field(default_factory=set)  # traces whose stored steps are replaced

    def apply(self, session: Session) -> None:
        session.flush()
        insert_traces(session, self.created)
        delete_steps(session, sorted(self.cleared))
        write_steps(session, [(trace_id, start, steps) for trace_id, (start, steps) in self.steps.items()])
        replace_spans(session, self.spans)


def upsert_traces(
    session: Session, request: ImportRequest, format_name: str, traces: Sequence[Trace], titler: Titler
) -> list[ImportedTrace]:
    """Create each trace, or update the owner's trace with the same external id, in one batch of writes."""
    external_ids = sorted({trace.external_id for trace in traces if trace.external_id})
    batch = _Batch(
        request,
        format_name,
        titler,
        existing=find_by_external_ids(session, request.owner_id, external_ids),
    )
    batch.stored = load_steps_by_trace(session, [row.id for row in batch.existing.values()])
    results = [batch.upsert(trace) for trace in traces]
    batch.writes.apply(session)
    return results


@dataclass
class _Batch:
    """The traces of one payload, upserted in order against what is stored and what came before."""

    request: ImportRequest
    format_name: str
    titler: Titler
    existing: dict[str, TraceRow]  # external id → row
    stored: dict[str, list[Step]] = field(default_factory=dict)  # trace id → its steps after this batch so far
    writes: _Writes = field(default_factory=_Writes)

    def upsert(self, trace: Trace) -> ImportedTrace:
        """Plan one trace's writes; a trace without a title keeps the stored one or gets a new one once."""
        row = self.existing.get(trace.external_id) if trace.external_id else None
        if not trace.title:
            trace = replace(trace, title=row.title if row is not None and row.title else self.titler(trace))
        if row is None:
            row = _new_row(self.request, self.format_name, trace)
            self.writes.created.append(row)
            self.existing[trace.external_id or row.id] = row
            self.writes.steps[row.id] = (0, trace.steps)
            result = ImportResult.CREATED
        else:
            merge = _merge_snapshot if self.format_name in NATIVE_FORMATS else _replace
            result = merge(row, self.stored.get(row.id, []), trace, self.writes)
            _update_header(row, self.request, self.format_name, trace, changed=result is not ImportResult.UNCHANGED)
        if result is not ImportResult.UNCHANGED:
            self.stored[row.id] = list(trace.steps)
        if result is not ImportResult.UNCHANGED or self.format_name not in NATIVE_FORMATS:
            self.writes.spans[row.id] = trace.spans  # spans may change while the steps stay the same
        return ImportedTrace(row.id, trace.external_id, result)


def resolve_source_id(metadata: Mapping[str, Any], explicit: str | None, format_name: str) -> str:
    """The explicit source id, else metadata.source_id → agent → source → the format name."""
    if explicit:
        return explicit
    for key in ("source_id", "agent", "source"):
        value = metadata.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()[:SOURCE_ID_MAX]
    return format_name


def _new_row(request: ImportRequest, format_name: str, trace: Trace) -> TraceRow:
    """A new trace's row, stored with the batch's writes (not added to the session)."""
    now = utc_now()
    return TraceRow(
        id=new_id(),
        owner_id=request.owner_id,
        external_id=trace.external_id,
        title=trace.title or "",
        source_format=format_name,
        source_id=resolve_source_id(trace.metadata, request.source_id, format_name),
        explicit_source_id=request.source_id is not None,
        trace_metadata=dict(trace.metadata),
        revision=1,
        step_count=len(trace.steps),
        created_at=now,
        updated_at=now,
    )


def _replace(row: TraceRow, stored: Sequence[Step], trace: Trace, writes: _Writes) -> ImportResult:
    if list(stored) == list(trace.steps):
        return ImportResult.UNCHANGED
    writes.cleared.add(row.id)
    writes.steps[row.id] = (0, trace.steps)
    return ImportResult.REPLACED


def _merge_snapshot(row: TraceRow, stored: Sequence[Step], trace: Trace, writes: _Writes) -> ImportResult:
    incoming = list(trace.steps)
    common = _common_prefix(stored, incoming)
    if common < min(len(stored), len(incoming)):
        raise TraceSyncError(row.external_id or row.id, common)
    if len(incoming) <= len(stored):
        return ImportResult.UNCHANGED
    writes.steps[row.id] = (len(stored), incoming[len(stored) :])
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
    row.updated_at = utc_now()
