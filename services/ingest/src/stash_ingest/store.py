"""The tables ingest owns: traces, steps, spans, annotations and trace-source aliases."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar, Literal

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    Result,
    String,
    Table,
    Text,
    UniqueConstraint,
    delete,
    func,
    select,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column
from sqlalchemy.sql.elements import ColumnElement

from stash_common import owner_versions
from stash_common.db import insert_rows, new_id, new_ids, utc_now
from stash_common.errors import InvalidArgument, NotFound
from stash_ingest.traces import Span, Step, StoredStep, StoredTrace, TraceSummary

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


class Base(DeclarativeBase):
    """Metadata of the tables ingest owns."""

    type_annotation_map = {dict[str, Any]: JSON, Any: JSON}
    # Every class here maps one declared Table (SQLAlchemy types it as any FromClause); bulk inserts need the Table.
    __table__: ClassVar[Table]


class TraceRow(Base):
    """A trace of one owner; `external_id` is the source's identity, unique per owner."""

    __tablename__ = "traces"
    __table_args__ = (
        # external_id leads: upserts look hundreds of one owner's external ids up at once.
        UniqueConstraint("external_id", "owner_id", name="uq_traces_external_id_owner"),
        Index("ix_traces_owner_created", "owner_id", "created_at"),
        Index("ix_traces_updated_id", "updated_at", "id"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    owner_id: Mapped[str] = mapped_column(String(64))
    external_id: Mapped[str | None] = mapped_column(String(500))
    title: Mapped[str] = mapped_column(Text)
    source_format: Mapped[str] = mapped_column(String(40))
    source_id: Mapped[str] = mapped_column(String(200))
    explicit_source_id: Mapped[bool] = mapped_column(Boolean, default=False)
    trace_metadata: Mapped[dict[str, Any]] = mapped_column("metadata", JSON, default=dict)
    revision: Mapped[int] = mapped_column(Integer, default=1)
    step_count: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)


class StepRow(Base):
    """One step of a trace at a zero-based position."""

    __tablename__ = "steps"
    __table_args__ = (UniqueConstraint("trace_id", "position", name="uq_steps_trace_position"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    trace_id: Mapped[str] = mapped_column(ForeignKey("traces.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)
    role: Mapped[str] = mapped_column(String(16))
    content: Mapped[str] = mapped_column(Text)
    tool_name: Mapped[str | None] = mapped_column(Text)
    tool_input: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    tool_call_id: Mapped[str | None] = mapped_column(Text)
    step_metadata: Mapped[dict[str, Any]] = mapped_column("metadata", JSON, default=dict)


class SpanRow(Base):
    """A timed operation of a trace; nanosecond times, step references by position."""

    __tablename__ = "spans"

    trace_id: Mapped[str] = mapped_column(ForeignKey("traces.id", ondelete="CASCADE"), primary_key=True)
    span_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    parent_id: Mapped[str | None] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(Text)
    kind: Mapped[str | None] = mapped_column(String(40))
    start_ns: Mapped[int] = mapped_column(BigInteger)
    end_ns: Mapped[int] = mapped_column(BigInteger)
    input: Mapped[Any] = mapped_column(JSON(none_as_null=True), nullable=True)
    output: Mapped[Any] = mapped_column(JSON(none_as_null=True), nullable=True)
    step_indices: Mapped[list[int]] = mapped_column(JSON, default=list)


class AnnotationRow(Base):
    """A rating and/or comment on a trace or one of its steps."""

    __tablename__ = "annotations"

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    trace_id: Mapped[str] = mapped_column(ForeignKey("traces.id", ondelete="CASCADE"), index=True)
    step_id: Mapped[str | None] = mapped_column(ForeignKey("steps.id", ondelete="CASCADE"), index=True)
    owner_id: Mapped[str] = mapped_column(String(64))
    author_id: Mapped[str] = mapped_column(String(64))
    author_name: Mapped[str] = mapped_column(String(200))
    rating: Mapped[int | None] = mapped_column(Integer)
    comment: Mapped[str | None] = mapped_column(Text)
    quote: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    label_error: Mapped[bool] = mapped_column(Boolean, default=False)
    label_error_note: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)


class TraceSourceRow(Base):
    """An owner's display name for one of their source ids."""

    __tablename__ = "trace_sources"

    owner_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    source_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    name: Mapped[str] = mapped_column(String(120))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)


class ReviewGrantRow(Base):
    """An owner's grant to a reviewer: every trace (`all_sources`) or those of the sources listed beside it."""

    __tablename__ = "review_grants"
    __table_args__ = (Index("ix_review_grants_reviewer", "reviewer_id"),)

    owner_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    reviewer_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    all_sources: Mapped[bool] = mapped_column(Boolean)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)


class ReviewGrantSourceRow(Base):
    """One source id a grant without `all_sources` shares."""

    __tablename__ = "review_grant_sources"
    __table_args__ = (
        ForeignKeyConstraint(
            ["owner_id", "reviewer_id"],
            ["review_grants.owner_id", "review_grants.reviewer_id"],
            ondelete="CASCADE",
        ),
    )

    owner_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    reviewer_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    source_id: Mapped[str] = mapped_column(String(200), primary_key=True)


class OwnerVersionRow(Base):
    """An owner's change marker for the gateway's SQL queries (see `stash_common.owner_rows`)."""

    __tablename__ = "ingest_owner_versions"

    owner_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    version: Mapped[str] = mapped_column(String(36))


def touch_owner(session: Session, owner_id: str) -> None:
    """A new change marker for the owner: the last statement of every transaction that changes their rows."""
    owner_versions.touch_owners(session, OwnerVersionRow.__table__, [owner_id])


def find_trace_row(session: Session, owner_id: str, trace_id: str) -> TraceRow:
    """The owner's trace row; another owner's trace is simply not found."""
    row = session.get(TraceRow, trace_id)
    if row is None or row.owner_id != owner_id:
        raise NotFound(f"trace {trace_id} not found")
    return row


def find_by_external_ids(session: Session, owner_id: str, external_ids: Sequence[str]) -> dict[str, TraceRow]:
    """The owner's traces with these external ids, locked for update (in id order, to avoid deadlocks).

    Filtering by external id alone keeps the planner on the (external_id, owner_id) index even before
    statistics exist; with the owner in the WHERE it scans all the owner's traces on a young table.
    """
    if not external_ids:
        return {}
    query = (
        select(TraceRow)
        .where(TraceRow.external_id.in_(external_ids))
        .order_by(TraceRow.external_id, TraceRow.owner_id)
        .with_for_update()
    )
    return {row.external_id: row for row in session.scalars(query) if row.external_id and row.owner_id == owner_id}


# The columns the writers below fill, in the order of their row tuples; a trace row's are all its columns, each
# with the attribute that holds it (`metadata` is `trace_metadata`).
_TRACE_ATTRIBUTES = {
    column.name: TraceRow.__mapper__.get_property_by_column(column).key for column in TraceRow.__table__.columns
}
_STEP_FIELDS = ("id", "trace_id", "position", "role", "content", "tool_name", "tool_input", "tool_call_id", "metadata")
_SPAN_FIELDS = (
    "trace_id",
    "span_id",
    "parent_id",
    "name",
    "kind",
    "start_ns",
    "end_ns",
    "input",
    "output",
    "step_indices",
)


def insert_traces(session: Session, rows: Sequence[TraceRow]) -> None:
    """Insert new trace rows, built but not added to the session, in one COPY (the ORM's inserts were a tenth of
    a 1,000-trace import); every mapped column is copied, so a column added to TraceRow is copied too."""
    values = [tuple(getattr(row, key) for key in _TRACE_ATTRIBUTES.values()) for row in rows]
    insert_rows(session, TraceRow.__table__, list(_TRACE_ATTRIBUTES), values)


def write_steps(session: Session, batches: Sequence[tuple[str, int, Sequence[Step]]]) -> None:
    """Insert (trace id, first position, steps) batches in one COPY, each row built as COPY sends it."""
    insert_rows(session, StepRow.__table__, _STEP_FIELDS, _new_step_rows(batches))


def _new_step_rows(batches: Sequence[tuple[str, int, Sequence[Step]]]) -> Iterator[tuple[Any, ...]]:
    for trace_id, start, steps in batches:
        for offset, (step_id, step) in enumerate(zip(new_ids(len(steps)), steps, strict=True), start):
            yield (
                step_id,
                trace_id,
                offset,
                step.role,
                step.content,
                step.tool_name,
                _plain(step.tool_input),
                step.tool_call_id,
                _plain(step.metadata),
            )


def _plain(value: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A step's JSON object as a dict, copied only when it is some other mapping (a frozen step's read-only one)."""
    return value if value is None or type(value) is dict else dict(value)


def replace_spans(session: Session, spans_by_trace: Mapping[str, Sequence[Span]]) -> None:
    """Make each listed trace's spans exactly the given ones."""
    if not spans_by_trace:
        return
    session.execute(delete(SpanRow).where(SpanRow.trace_id.in_(list(spans_by_trace))))
    rows = [_span_row(trace_id, span) for trace_id, spans in spans_by_trace.items() for span in spans]
    insert_rows(session, SpanRow.__table__, _SPAN_FIELDS, rows)


def _span_row(trace_id: str, span: Span) -> tuple[Any, ...]:
    return (
        trace_id,
        span.id,
        span.parent_id,
        span.name,
        span.kind,
        span.start_ns,
        span.end_ns,
        span.input,
        span.output,
        list(span.step_indices),
    )


def delete_steps(session: Session, trace_ids: Sequence[str]) -> None:
    """Remove every step of these traces; annotations on those steps go with them (ON DELETE CASCADE)."""
    if trace_ids:
        session.execute(delete(StepRow).where(StepRow.trace_id.in_(trace_ids)))


# A step as the labeler reads it, in this order: id, index, role, content, tool name, tool input, tool call id,
# metadata (None for none).
STEP_ROW_COLUMNS = (
    StepRow.id,
    StepRow.position,
    StepRow.role,
    StepRow.content,
    StepRow.tool_name,
    StepRow.tool_input,
    StepRow.tool_call_id,
    StepRow.step_metadata,
)
# Steps are read as plain rows, not ORM objects: they are never changed in place, and building
# 10,000 mapped instances costs most of a large trace's read time.
_STEP_COLUMNS = (StepRow.trace_id, *STEP_ROW_COLUMNS)


def load_steps_by_trace(session: Session, trace_ids: Sequence[str]) -> dict[str, list[Step]]:
    """The steps of several traces, in order, by trace id."""
    stored = load_stored_steps_by_trace(session, trace_ids)
    return {trace_id: [item.step for item in steps] for trace_id, steps in stored.items()}


def load_stored_steps_by_trace(session: Session, trace_ids: Sequence[str]) -> dict[str, list[StoredStep]]:
    """The stored steps (with their ids and indices) of several traces, in order, by trace id: one query."""
    steps: dict[str, list[StoredStep]] = {trace_id: [] for trace_id in trace_ids}
    if trace_ids:
        for row in _step_rows(session, trace_ids):
            steps[row.trace_id].append(StoredStep(id=row.id, index=row.position, step=_step(row)))
    return steps


def step_rows_by_trace(session: Session, trace_ids: Sequence[str]) -> dict[str, list[tuple[Any, ...]]]:
    """Every step of several traces as plain tuples of `STEP_ROW_COLUMNS`, in order, by trace id: one query.

    Tuples, not `StoredStep`s: the labeler reads every step of every new revision, and two objects per
    step were a quarter of ingest's time answering it."""
    steps: dict[str, list[tuple[Any, ...]]] = {trace_id: [] for trace_id in trace_ids}
    if trace_ids:
        for row in _step_rows(session, trace_ids):
            steps[row.trace_id].append(tuple(row[1:]))
    return steps


def _step_rows(session: Session, trace_ids: Sequence[str]) -> Result[Any]:
    """The `_STEP_COLUMNS` of every step of several traces, ordered by trace and position."""
    query = select(*_STEP_COLUMNS).where(StepRow.trace_id.in_(trace_ids)).order_by(StepRow.trace_id, StepRow.position)
    return session.execute(query)


def owned_trace_rows(session: Session, owner_id: str, trace_ids: Sequence[str]) -> dict[str, TraceRow]:
    """The owner's rows among these trace ids, by id; another owner's trace is simply absent."""
    query = select(TraceRow).where(TraceRow.owner_id == owner_id, TraceRow.id.in_(trace_ids))
    return {row.id: row for row in session.scalars(query)} if trace_ids else {}


def load_steps(session: Session, trace_id: str, offset: int = 0, limit: int | None = None) -> list[StoredStep]:
    """The trace's steps in order: all of them, or `limit` steps from index `offset` on."""
    query = select(*_STEP_COLUMNS).where(StepRow.trace_id == trace_id, StepRow.position >= offset)
    rows = session.execute(query.order_by(StepRow.position).limit(limit))
    return [StoredStep(id=row.id, index=row.position, step=_step(row)) for row in rows]


def _step(row: Any) -> Step:
    return Step(
        role=row.role,
        content=row.content,
        tool_name=row.tool_name,
        tool_input=row.tool_input,
        tool_call_id=row.tool_call_id,
        metadata=row.step_metadata or {},
    )


def load_spans(session: Session, trace_id: str) -> list[Span]:
    """The trace's spans ordered by start time, then id."""
    rows = session.scalars(
        select(SpanRow).where(SpanRow.trace_id == trace_id).order_by(SpanRow.start_ns, SpanRow.span_id)
    )
    return [
        Span(
            id=row.span_id,
            name=row.name,
            start_ns=row.start_ns,
            end_ns=row.end_ns,
            parent_id=row.parent_id,
            kind=row.kind,
            input=row.input,
            output=row.output,
            step_indices=tuple(row.step_indices or ()),
        )
        for row in rows
    ]


@dataclass(frozen=True)
class TraceFilter:
    """Which of an owner's traces to show: by source, by import date, and by id."""

    source_id: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    trace_ids: Sequence[str] = ()


def list_trace_rows(
    session: Session,
    scope: ColumnElement[bool],
    where: TraceFilter,
    limit: int,
    offset: int,
    source_order: Literal["ascending", "descending"] | None = None,
) -> tuple[list[TraceRow], int]:
    """One page of the traces in `scope` (an owner's own, or those shared with a reviewer), newest import first,
    and how many match in all.

    With `source_order` the pages run by source display name (the source id where none is set,
    ignoring case) first, newest import first within a source."""
    conditions = [scope]
    if where.source_id is not None:
        conditions.append(TraceRow.source_id == where.source_id)
    if where.created_after is not None:
        conditions.append(TraceRow.created_at >= where.created_after)
    if where.created_before is not None:
        conditions.append(TraceRow.created_at < where.created_before)
    if where.trace_ids:
        conditions.append(TraceRow.id.in_(where.trace_ids))
    total = session.scalar(select(func.count()).select_from(TraceRow).where(*conditions)) or 0
    page = select(TraceRow).where(*conditions)
    if source_order is not None:
        named = (TraceSourceRow.owner_id == TraceRow.owner_id) & (TraceSourceRow.source_id == TraceRow.source_id)
        shown_name = func.lower(func.coalesce(TraceSourceRow.name, TraceRow.source_id))
        page = page.outerjoin(TraceSourceRow, named).order_by(
            shown_name.asc() if source_order == "ascending" else shown_name.desc()
        )
    page = page.order_by(TraceRow.created_at.desc(), TraceRow.id)
    return list(session.scalars(page.limit(limit).offset(offset))), total


def summarise(session: Session, rows: Sequence[TraceRow]) -> list[TraceSummary]:
    """Summaries with annotation counts and source display names, in the order of `rows`."""
    if not rows:
        return []
    counts = _annotation_counts(session, [row.id for row in rows])
    names = {owner_id: source_names(session, owner_id) for owner_id in {row.owner_id for row in rows}}
    return [
        _summary(row, counts.get(row.id, (0, 0, 0, 0)), names[row.owner_id].get(row.source_id, row.source_id))
        for row in rows
    ]


def _annotation_counts(session: Session, trace_ids: Sequence[str]) -> dict[str, tuple[int, int, int, int]]:
    """(positive, negative, comments, label errors) per trace; flagged annotations never count as ratings."""
    trainable = AnnotationRow.label_error.is_(False)
    query = (
        select(
            AnnotationRow.trace_id,
            func.count().filter(trainable, AnnotationRow.rating == 1),
            func.count().filter(trainable, AnnotationRow.rating == -1),
            func.count().filter(AnnotationRow.comment.is_not(None)),
            func.count().filter(AnnotationRow.label_error.is_(True)),
        )
        .where(AnnotationRow.trace_id.in_(trace_ids))
        .group_by(AnnotationRow.trace_id)
    )
    return {trace_id: (pos, neg, com, err) for trace_id, pos, neg, com, err in session.execute(query)}


def _summary(row: TraceRow, counts: tuple[int, int, int, int], source_name: str) -> TraceSummary:
    positive, negative, comments, label_errors = counts
    return TraceSummary(
        id=row.id,
        owner_id=row.owner_id,
        external_id=row.external_id,
        title=row.title,
        source_format=row.source_format,
        source_id=row.source_id,
        source_name=source_name,
        step_count=row.step_count,
        positive_count=positive,
        negative_count=negative,
        comment_count=comments,
        label_error_count=label_errors,
        revision=row.revision,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def load_trace(session: Session, row: TraceRow, steps_offset: int = 0, steps_limit: int | None = None) -> StoredTrace:
    """The stored trace behind a row: whole, or with one page of its steps (`load_steps`)."""
    return StoredTrace(
        summary=summarise(session, [row])[0],
        metadata=row.trace_metadata or {},
        steps=tuple(load_steps(session, row.id, steps_offset, steps_limit)),
        spans=tuple(load_spans(session, row.id)),
    )


def source_names(session: Session, owner_id: str) -> dict[str, str]:
    """The owner's source aliases: source id → display name."""
    query = select(TraceSourceRow.source_id, TraceSourceRow.name).where(TraceSourceRow.owner_id == owner_id)
    return {source_id: name for source_id, name in session.execute(query)}


def find_step(session: Session, trace_id: str, step_id: str) -> StoredStep:
    """One step of the trace; a step of another trace is an invalid reference."""
    row = session.get(StepRow, step_id)
    if row is None or row.trace_id != trace_id:
        raise InvalidArgument("step_id", f"step {step_id} is not a step of trace {trace_id}")
    return StoredStep(id=row.id, index=row.position, step=_step(row))


def save_source_name(session: Session, owner_id: str, source_id: str, name: str) -> None:
    """Upsert the owner's display name for a source id."""
    row = session.get(TraceSourceRow, (owner_id, source_id))
    if row is None:
        session.add(TraceSourceRow(owner_id=owner_id, source_id=source_id, name=name, updated_at=utc_now()))
    else:
        row.name, row.updated_at = name, utc_now()
    session.flush()


def source_counts(session: Session, owner_id: str) -> dict[str, int]:
    """How many traces the owner has per source id."""
    query = select(TraceRow.source_id, func.count()).where(TraceRow.owner_id == owner_id).group_by(TraceRow.source_id)
    return {source_id: count for source_id, count in session.execute(query)}


def shared_source_counts(session: Session, scope: ColumnElement[bool]) -> dict[tuple[str, str], int]:
    """How many of the traces in `scope` (those shared with a reviewer) each (owner id, source id) has."""
    key = (TraceRow.owner_id, TraceRow.source_id)
    query = select(*key, func.count()).where(scope).group_by(*key)
    return {(owner_id, source_id): count for owner_id, source_id, count in session.execute(query)}


def owners_source_names(session: Session, owner_ids: Collection[str]) -> dict[tuple[str, str], str]:
    """The owners' source aliases: (owner id, source id) → display name."""
    query = select(TraceSourceRow.owner_id, TraceSourceRow.source_id, TraceSourceRow.name)
    rows = session.execute(query.where(TraceSourceRow.owner_id.in_(owner_ids)))
    return {(owner_id, source_id): name for owner_id, source_id, name in rows}


def owner_trace_rows(session: Session, owner_id: str, trace_ids: Sequence[str] = ()) -> list[TraceRow]:
    """The owner's traces (or just these ids), oldest first — what exports walk through."""
    query = select(TraceRow).where(TraceRow.owner_id == owner_id)
    if trace_ids:
        query = query.where(TraceRow.id.in_(trace_ids))
    return list(session.scalars(query.order_by(TraceRow.created_at, TraceRow.id)))


class OtelSpanRow(Base):
    """A raw OTLP span as received (OTLP/JSON shape with its resource and scope), per owner."""

    __tablename__ = "otel_spans"

    # trace_id leads the key: each OTLP request reads the stored spans of hundreds of one owner's traces.
    trace_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    span_id: Mapped[str] = mapped_column(String(16), primary_key=True)
    owner_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    body: Mapped[dict[str, Any]] = mapped_column(JSON)
    received_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)


def save_otel_spans(
    session: Session,
    owner_id: str,
    spans: Mapping[tuple[str, str], Mapping[str, Any]],
    stored: Collection[tuple[str, str]],
) -> None:
    """Store raw spans by (owner, trace id, span id): a re-sent span (one of `stored`) overwrites itself."""
    resent = [key for key in spans if key in stored]
    for trace_id, span_id in resent:
        session.execute(
            delete(OtelSpanRow).where(
                OtelSpanRow.owner_id == owner_id, OtelSpanRow.trace_id == trace_id, OtelSpanRow.span_id == span_id
            )
        )
    received = utc_now()
    rows = [(owner_id, trace_id, span_id, dict(body), received) for (trace_id, span_id), body in spans.items()]
    insert_rows(session, OtelSpanRow.__table__, ("owner_id", "trace_id", "span_id", "body", "received_at"), rows)


def load_otel_spans(session: Session, owner_id: str, trace_ids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """Every stored raw span of these traces, by trace id."""
    spans: dict[str, list[dict[str, Any]]] = {trace_id: [] for trace_id in trace_ids}
    query = (
        select(OtelSpanRow.trace_id, OtelSpanRow.body)
        .where(OtelSpanRow.owner_id == owner_id, OtelSpanRow.trace_id.in_(trace_ids))
        .order_by(OtelSpanRow.trace_id, OtelSpanRow.span_id)
    )
    for trace_id, body in session.execute(query):
        spans[trace_id].append(body)
    return spans
