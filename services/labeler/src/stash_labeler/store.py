"""The tables the labeler owns and every query on them: the evaluation queue, kept labels, PRM findings,
live task windows, the course-correction ledger, and the sweep cursor.

All of the labeler's SQL lives here. Domain code hands in and gets back dataclasses (kept labels,
findings, trajectory events, corrections); the servicer reads evaluation and finding rows directly,
because it only renders them as messages.

Every transaction that changes an owner's evaluations or findings ends by giving the owner a new change
marker (`touch_owners`), which tells the gateway its cached SQL tables are stale. The functions that are
a transaction of their own (requeue, fail, forget, requeue_stale) and `claim` do it themselves; the callers of
`enqueue` and `save_evaluations` do it after their last write.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import zip_longest
from pathlib import Path
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    Column,
    DateTime,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    delete,
    func,
    insert,
    select,
    text,
    update,
)
from sqlalchemy.dialects import sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from stash_common import owner_versions
from stash_common.db import insert_rows, new_id, utc_now
from stash_common.planner_statistics import rows_loaded
from stash_labeler.evaluation import Evaluation, KeptLabel
from stash_labeler.label_schema import LabelSource, StepLabel
from stash_labeler.labeling.protocol import ChunkLabel
from stash_labeler.prm import CourseCorrection, Finding, TrajectoryEvent
from stash_labeler.prm.corrections import SUGGESTION_MAX_CHARS
from stash_labeler.traces import LabelerTrace, TraceRevision

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
QUEUED, RUNNING, SUCCEEDED, FAILED = "queued", "running", "succeeded", "failed"


class Base(DeclarativeBase):
    """Metadata of the tables the labeler owns."""

    type_annotation_map = {dict[str, Any]: JSON, Any: JSON}


class ChunkLabelRow(Base):
    """The kept label of one chunk: reused while the chunk's fingerprint is unchanged."""

    # Typed as the Table it is (SQLAlchemy types it as any FromClause): the labels are upserted with Core.
    __table__: ClassVar[Table]
    __tablename__ = "chunk_labels"

    trace_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    chunk_id: Mapped[str] = mapped_column(String(20), primary_key=True)
    owner_id: Mapped[str] = mapped_column(String(64))
    fingerprint: Mapped[str] = mapped_column(String(64))
    label: Mapped[dict[str, Any]] = mapped_column(JSON)
    source: Mapped[str] = mapped_column(String(20))
    model: Mapped[str | None] = mapped_column(String(200))
    # The grading model's distribution over the credit labels, when the chunk was checked.
    distribution: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)


class EvaluationRow(Base):
    """The labels and scores of one trace revision; every revision keeps its own row."""

    __tablename__ = "evaluations"
    __table_args__ = (
        UniqueConstraint("trace_id", "revision", name="uq_evaluations_trace_revision"),
        Index("ix_evaluations_status_updated", "status", "updated_at"),
        Index("ix_evaluations_status_owner_updated", "status", "owner_id", "updated_at"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    owner_id: Mapped[str] = mapped_column(String(64))
    trace_id: Mapped[str] = mapped_column(String(36))
    revision: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(20), default=QUEUED)
    error: Mapped[str | None] = mapped_column(Text)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    labeler: Mapped[str | None] = mapped_column(String(20))
    trace_score: Mapped[float | None] = mapped_column(Float)
    outcome: Mapped[str | None] = mapped_column(String(40))
    # {"steps": [...], "tasks": [...]}: the evaluation as the API returns it.
    body: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class ProcessFindingRow(Base):
    """A failure pattern found in the latest evaluated revision of a stored trace."""

    __tablename__ = "process_findings"
    __table_args__ = (
        Index("ix_process_findings_owner_pattern", "owner_id", "pattern"),
        Index("ix_process_findings_trace", "trace_id"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    owner_id: Mapped[str] = mapped_column(String(64))
    trace_id: Mapped[str] = mapped_column(String(36))
    revision: Mapped[int] = mapped_column(Integer)
    pattern: Mapped[str] = mapped_column(String(40))
    taxonomy: Mapped[str] = mapped_column(String(40))
    severity: Mapped[int] = mapped_column(Integer)
    source: Mapped[str] = mapped_column(String(10))
    confidence: Mapped[float | None] = mapped_column(Float)
    first_step_id: Mapped[str] = mapped_column(String(36))
    last_step_id: Mapped[str] = mapped_column(String(36))
    first_step_index: Mapped[int] = mapped_column(Integer)
    last_step_index: Mapped[int] = mapped_column(Integer)
    suggestion: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)


class TrajectoryEventRow(Base):
    """One event of a live task's trailing window (the newest 50 per task are kept)."""

    __tablename__ = "trajectory_events"

    owner_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    task_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    event: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)


class CourseCorrectionRow(Base):
    """The ledger of emitted course corrections: at most one per fingerprint per task."""

    __tablename__ = "course_corrections"
    __table_args__ = (
        UniqueConstraint("owner_id", "task_id", "fingerprint", name="uq_course_corrections_task_fingerprint"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    owner_id: Mapped[str] = mapped_column(String(64))
    task_id: Mapped[str] = mapped_column(String(200))
    taxonomy: Mapped[str] = mapped_column(String(40))
    pattern: Mapped[str] = mapped_column(String(40))
    fingerprint: Mapped[str] = mapped_column(String(100))
    suggestion: Mapped[str] = mapped_column(String(500))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)


class SweepCursorRow(Base):
    """How far the sweep has read ingest's list of trace revisions."""

    __tablename__ = "sweep_cursors"

    name: Mapped[str] = mapped_column(String(40), primary_key=True)
    cursor: Mapped[str] = mapped_column(Text)


class OwnerVersionRow(Base):
    """An owner's change marker for the gateway's SQL queries (see `stash_common.owner_rows`)."""

    # Typed as the Table it is (SQLAlchemy types it as any FromClause): the markers are written with Core.
    __table__: ClassVar[Table]
    __tablename__ = "labeler_owner_versions"

    owner_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    version: Mapped[str] = mapped_column(String(36))


def touch_owners(session: Session, owner_ids: Iterable[str]) -> None:
    """New change markers for these owners: the last statement of a transaction that changed their rows."""
    owner_versions.touch_owners(session, OwnerVersionRow.__table__, owner_ids)


def _touch_owner_of(session: Session, evaluation_id: str) -> None:
    owner_id = session.scalar(select(EvaluationRow.owner_id).where(EvaluationRow.id == evaluation_id))
    if owner_id is not None:
        touch_owners(session, [owner_id])


def enqueue(session: Session, owner_id: str, trace_id: str, revision: int) -> bool:
    """Queue an evaluation of the revision unless it already has one; True when queued now."""
    found = session.scalar(
        select(EvaluationRow.id).where(EvaluationRow.trace_id == trace_id, EvaluationRow.revision == revision)
    )
    if found is not None:
        return False
    session.add(EvaluationRow(owner_id=owner_id, trace_id=trace_id, revision=revision))
    return True


def enqueue_revisions(session: Session, owner_id: str, revisions: Sequence[tuple[str, int]]) -> int:
    """Queue evaluations of the owner's revisions (trace id, revision) that have none, in a few statements;
    a trace with evaluations of another owner is not this owner's and is skipped. Returns how many were queued."""
    trace_ids = list({trace_id for trace_id, _revision in revisions})
    if not trace_ids:
        return 0
    found = session.execute(
        select(EvaluationRow.owner_id, EvaluationRow.trace_id, EvaluationRow.revision).where(
            EvaluationRow.trace_id.in_(trace_ids)
        )
    ).all()
    others = {row.trace_id for row in found if row.owner_id != owner_id}
    taken = {(row.trace_id, row.revision) for row in found}
    wanted = dict.fromkeys(item for item in revisions if item[0] not in others and item not in taken)
    if wanted:
        now = utc_now()
        rows = [
            {"id": new_id(), "owner_id": owner_id, "trace_id": trace_id, "revision": revision}
            | {"status": QUEUED, "attempts": 0, "created_at": now, "updated_at": now}
            for trace_id, revision in wanted
        ]
        session.execute(insert(EvaluationRow), rows)
    return len(wanted)


def evaluated_for_another_owner(session: Session, owner_id: str, trace_id: str) -> bool:
    """True when the trace id has evaluations of an owner other than this one: it is not this owner's trace."""
    query = select(EvaluationRow.id).where(EvaluationRow.trace_id == trace_id, EvaluationRow.owner_id != owner_id)
    return session.scalar(query.limit(1)) is not None


def requeue(session: Session, evaluation_id: str) -> None:
    """Run a saved evaluation again, with its attempts counted afresh (relabel, or ingest out of reach)."""
    session.execute(
        update(EvaluationRow)
        .where(EvaluationRow.id == evaluation_id)
        .values(status=QUEUED, error=None, attempts=0, updated_at=utc_now())
    )
    _touch_owner_of(session, evaluation_id)


@dataclass(frozen=True)
class Claimed:
    """A queued evaluation this worker moved to running, and the revision it is of."""

    evaluation_id: str
    revision: TraceRevision


def claim(session: Session, evaluation_ids: Sequence[str]) -> list[Claimed]:
    """Move these evaluations to running where they are still queued; of two claimers, only one gets each."""
    if not evaluation_ids:
        return []
    rows = session.execute(
        update(EvaluationRow)
        .where(EvaluationRow.id.in_(evaluation_ids), EvaluationRow.status == QUEUED)
        .values(status=RUNNING, attempts=EvaluationRow.attempts + 1, updated_at=utc_now())
        .returning(EvaluationRow.id, EvaluationRow.owner_id, EvaluationRow.trace_id, EvaluationRow.revision)
    ).all()
    touch_owners(session, [row.owner_id for row in rows])
    won = {row.id: Claimed(row.id, TraceRevision(row.owner_id, row.trace_id, row.revision)) for row in rows}
    return [won[evaluation_id] for evaluation_id in evaluation_ids if evaluation_id in won]


@dataclass(frozen=True)
class Evaluated:
    """A succeeded evaluation to save: its row, the trace as evaluated, the result and the PRM's findings."""

    evaluation_id: str
    trace: LabelerTrace
    evaluation: Evaluation
    findings: Sequence[Finding]


def save_evaluations(session: Session, evaluated: Sequence[Evaluated]) -> list[Evaluated]:
    """Record succeeded evaluations, keep their labels and replace their traces' findings; returns those saved.

    An evaluation whose row is gone (its trace was deleted meanwhile) saves nothing. Each trace appears at
    most once. The rows are locked first, so a concurrent delete of a trace waits for this transaction.
    """
    ids = [item.evaluation_id for item in evaluated]
    present = set(session.scalars(select(EvaluationRow.id).where(EvaluationRow.id.in_(ids)).with_for_update()))
    saved = [item for item in evaluated if item.evaluation_id in present]
    if not saved:
        return []
    now = utc_now()
    session.execute(update(EvaluationRow), [_succeeded(item, now) for item in saved])
    _keep_labels(session, [item for item in saved if item.evaluation.labeler != LabelSource.IMPORTED], now)
    _replace_findings(session, saved)
    return saved


def _succeeded(item: Evaluated, now: datetime) -> dict[str, Any]:
    evaluation = item.evaluation
    return {
        "id": item.evaluation_id,
        "status": SUCCEEDED,
        "error": None,
        "body": evaluation.body,
        "trace_score": evaluation.trace_score,
        "outcome": evaluation.outcome,
        "labeler": evaluation.labeler.value,
        "updated_at": now,
        "finished_at": now,
    }


def fail(session: Session, evaluation_id: str, error: str) -> None:
    """Record what stopped an evaluation; relabeling tries again."""
    now = utc_now()
    session.execute(
        update(EvaluationRow)
        .where(EvaluationRow.id == evaluation_id)
        .values(status=FAILED, error=error, updated_at=now, finished_at=now)
    )
    _touch_owner_of(session, evaluation_id)


def queued_ids(session: Session, limit: int) -> list[str]:
    """Up to `limit` queued evaluations, taken in turns from every owner with work queued.

    Round-robin by owner (the oldest queued row first within each, owners in the order of their oldest row),
    so one owner's import of 90 000 traces does not hold back another owner's first labels.
    """
    owners = list(
        session.scalars(
            select(EvaluationRow.owner_id)
            .where(EvaluationRow.status == QUEUED)
            .group_by(EvaluationRow.owner_id)
            .order_by(func.min(EvaluationRow.updated_at))
            .limit(limit)
        )
    )
    share = max(1, limit // max(1, len(owners)))
    queues = [_oldest_queued(session, owner_id, share) for owner_id in owners]
    return [evaluation_id for turn in zip_longest(*queues) for evaluation_id in turn if evaluation_id][:limit]


def _oldest_queued(session: Session, owner_id: str, limit: int) -> list[str]:
    query = select(EvaluationRow.id).where(EvaluationRow.status == QUEUED, EvaluationRow.owner_id == owner_id)
    return list(session.scalars(query.order_by(EvaluationRow.updated_at).limit(limit)))


def renew_leases(session: Session, evaluation_ids: Iterable[str]) -> None:
    """Mark running evaluations as still in hand: their worker is alive (see `requeue_stale`)."""
    ids = list(evaluation_ids)
    if ids:
        session.execute(
            update(EvaluationRow)
            .where(EvaluationRow.id.in_(ids), EvaluationRow.status == RUNNING)
            .values(updated_at=utc_now())
        )


def requeue_stale(session: Session, older_than: timedelta, max_attempts: int) -> int:
    """Queue again evaluations whose worker stopped renewing them (it died); fail those out of attempts."""
    cutoff = utc_now() - older_than
    stale = list(
        session.scalars(select(EvaluationRow).where(EvaluationRow.status == RUNNING, EvaluationRow.updated_at < cutoff))
    )
    for row in stale:
        if row.attempts >= max_attempts:
            row.status, row.error = FAILED, f"interrupted {row.attempts} times; relabel to try again"
        else:
            row.status = QUEUED
        row.updated_at = utc_now()
    touch_owners(session, [row.owner_id for row in stale])
    return len(stale)


def latest_evaluation(
    session: Session, owner_id: str, trace_id: str, revision: int | None, succeeded_only: bool = False
) -> EvaluationRow | None:
    """The evaluation of a revision, or of the latest evaluated revision (queued and running included)."""
    query = select(EvaluationRow).where(EvaluationRow.owner_id == owner_id, EvaluationRow.trace_id == trace_id)
    if revision is not None:
        query = query.where(EvaluationRow.revision == revision)
    if succeeded_only:
        query = query.where(EvaluationRow.status == SUCCEEDED)
    return session.scalar(query.order_by(EvaluationRow.revision.desc()).limit(1))


def latest_succeeded(session: Session, owner_id: str, trace_ids: Sequence[str]) -> dict[str, EvaluationRow]:
    """The newest succeeded evaluation of each trace."""
    rows = session.scalars(
        select(EvaluationRow)
        .where(
            EvaluationRow.owner_id == owner_id,
            EvaluationRow.trace_id.in_(trace_ids),
            EvaluationRow.status == SUCCEEDED,
        )
        .order_by(EvaluationRow.revision)
    )
    return {row.trace_id: row for row in rows}


def kept_labels(session: Session, trace_id: str) -> dict[str, KeptLabel]:
    """The kept labels of a trace by chunk id."""
    return kept_labels_of(session, [trace_id]).get(trace_id, {})


def kept_labels_of(session: Session, trace_ids: Sequence[str]) -> dict[str, dict[str, KeptLabel]]:
    """The kept labels of each of these traces that has any, by trace id and chunk id."""
    kept: dict[str, dict[str, KeptLabel]] = {}
    for row in session.scalars(select(ChunkLabelRow).where(ChunkLabelRow.trace_id.in_(trace_ids))):
        kept.setdefault(row.trace_id, {})[row.chunk_id] = _kept(row)
    return kept


def _keep_labels(session: Session, evaluated: Sequence[Evaluated], now: datetime) -> None:
    """Upsert each chunk's label; a kept label of a chunk the evaluation did not label stays as it was."""
    rows = [
        {
            "trace_id": item.trace.id,
            "chunk_id": chunk_id,
            "owner_id": item.trace.owner_id,
            "fingerprint": kept.label.fingerprint,
            "label": item.evaluation.label_metadata[chunk_id],  # unset fields left out: they read back as None
            "source": kept.label.source.value,
            "model": kept.label.model,
            "distribution": kept.distribution,
            "created_at": now,
        }
        for item in evaluated
        for chunk_id, kept in item.evaluation.labels.items()
    ]
    if not rows:
        return
    if session.get_bind().dialect.name == "postgresql":
        _copy_upsert_labels(session, rows)
        return
    statement = sqlite.insert(ChunkLabelRow.__table__)
    upsert = statement.on_conflict_do_update(
        index_elements=["trace_id", "chunk_id"], set_={name: statement.excluded[name] for name in KEPT_COLUMNS}
    )
    session.execute(upsert, rows)


KEPT_COLUMNS = ("owner_id", "fingerprint", "label", "source", "model", "distribution")
# The chunk labels of one save, copied in before they are upserted; emptied when the transaction commits.
INCOMING_LABELS = Table(
    "chunk_labels_incoming",
    MetaData(),
    *(Column(column.name, column.type) for column in ChunkLabelRow.__table__.columns),
    info={"temporary": True},
)


def _copy_upsert_labels(session: Session, rows: Sequence[dict[str, Any]]) -> None:
    """Upsert on PostgreSQL through COPY into a temporary table and one INSERT … SELECT: a save holds about 75
    labels per trace, which row-by-row upserts took a fifth of the worker's time to write. Each chunk appears
    once per save (`save_evaluations` has each trace at most once)."""
    session.execute(
        text(
            f"CREATE TEMPORARY TABLE IF NOT EXISTS {INCOMING_LABELS.name} "
            f"(LIKE {ChunkLabelRow.__tablename__}) ON COMMIT DELETE ROWS"
        )
    )
    columns = [column.name for column in INCOMING_LABELS.columns]
    insert_rows(session, INCOMING_LABELS, columns, [[row[name] for name in columns] for row in rows])
    names = ", ".join(columns)
    updates = ", ".join(f"{name} = excluded.{name}" for name in KEPT_COLUMNS)
    session.execute(
        text(
            f"INSERT INTO {ChunkLabelRow.__tablename__} ({names}) SELECT {names} FROM {INCOMING_LABELS.name} "
            f"ON CONFLICT (trace_id, chunk_id) DO UPDATE SET {updates}"
        )
    )
    rows_loaded(session, ChunkLabelRow.__tablename__, len(rows))


def _kept(row: ChunkLabelRow) -> KeptLabel:
    label = ChunkLabel(StepLabel.model_validate(row.label), LabelSource(row.source), row.model, row.fingerprint)
    return KeptLabel(label, row.distribution)


def forget_trace(session: Session, trace_id: str) -> None:
    """Drop everything the labeler keeps about a deleted trace."""
    owners = set(session.scalars(select(EvaluationRow.owner_id).where(EvaluationRow.trace_id == trace_id)))
    forget_labels(session, trace_id)
    session.execute(delete(ProcessFindingRow).where(ProcessFindingRow.trace_id == trace_id))
    session.execute(delete(EvaluationRow).where(EvaluationRow.trace_id == trace_id))
    session.execute(delete(SectionSummaryRow).where(SectionSummaryRow.trace_id == trace_id))
    session.execute(delete(TraceCompletionRow).where(TraceCompletionRow.trace_id == trace_id))
    touch_owners(session, owners)


def _replace_findings(session: Session, saved: Sequence[Evaluated]) -> None:
    """Replace each trace's findings with those of the revision just saved."""
    session.execute(delete(ProcessFindingRow).where(ProcessFindingRow.trace_id.in_([item.trace.id for item in saved])))
    rows = [
        {"owner_id": item.trace.owner_id, "trace_id": item.trace.id, "revision": item.trace.revision, **values}
        for item in saved
        for values in (_finding_row(finding) for finding in item.findings)
    ]
    if rows:
        session.execute(insert(ProcessFindingRow), rows)


def _finding_row(finding: Finding) -> dict[str, Any]:
    values = finding.as_json()
    values["suggestion"] = values["suggestion"][:SUGGESTION_MAX_CHARS]
    return values


def list_findings(
    session: Session,
    owner_id: str,
    trace_sets: Sequence[Sequence[str]],
    pattern: str | None,
    limit: int,
    offset: int,
) -> tuple[list[ProcessFindingRow], int]:
    """One page of the owner's findings (newest first) and how many match in all; a finding's trace must be
    in every one of `trace_sets`."""
    where = [ProcessFindingRow.owner_id == owner_id]
    where += [ProcessFindingRow.trace_id.in_(trace_ids) for trace_ids in trace_sets]
    if pattern is not None:
        where.append(ProcessFindingRow.pattern == pattern)
    total = session.scalar(select(func.count()).select_from(ProcessFindingRow).where(*where)) or 0
    query = select(ProcessFindingRow).where(*where).order_by(ProcessFindingRow.created_at.desc(), ProcessFindingRow.id)
    return list(session.scalars(query.limit(limit).offset(offset))), total


def append_events(
    session: Session, owner_id: str, task_id: str, events: Sequence[TrajectoryEvent], keep: int
) -> list[TrajectoryEvent]:
    """Append a live task's events, drop all but its newest `keep`, and return those, oldest first."""
    key = (TrajectoryEventRow.owner_id == owner_id, TrajectoryEventRow.task_id == task_id)
    last = session.scalar(select(func.max(TrajectoryEventRow.seq)).where(*key)) or 0
    for offset, event in enumerate(events, start=1):
        session.add(TrajectoryEventRow(owner_id=owner_id, task_id=task_id, seq=last + offset, event=_event_json(event)))
    session.flush()
    newest = last + len(events)
    session.execute(delete(TrajectoryEventRow).where(*key, TrajectoryEventRow.seq <= newest - keep))
    rows = session.scalars(select(TrajectoryEventRow).where(*key).order_by(TrajectoryEventRow.seq))
    return [_event(row.event) for row in rows]


def _event_json(event: TrajectoryEvent) -> dict[str, Any]:
    return {
        "timestamp": event.timestamp.isoformat(),
        "role": event.role,
        "action": event.action,
        "target_files": list(event.target_files),
        "success": event.success,
        "duration_s": event.duration_s,
        "signature": event.signature,
    }


def _event(saved: dict[str, Any]) -> TrajectoryEvent:
    return TrajectoryEvent(
        timestamp=datetime.fromisoformat(saved["timestamp"]),
        role=saved["role"],
        action=saved["action"],
        target_files=tuple(saved["target_files"]),
        success=saved["success"],
        duration_s=saved["duration_s"],
        signature=saved.get("signature", ""),
    )


def emitted_fingerprints(session: Session, owner_id: str, task_id: str) -> set[str]:
    """The fingerprints of every correction the task has been given."""
    query = select(CourseCorrectionRow.fingerprint).where(
        CourseCorrectionRow.owner_id == owner_id, CourseCorrectionRow.task_id == task_id
    )
    return set(session.scalars(query))


def add_correction(session: Session, owner_id: str, correction: CourseCorrection) -> bool:
    """Add a correction to the ledger; False when a concurrent request emitted the same fingerprint first."""
    row = CourseCorrectionRow(
        owner_id=owner_id,
        task_id=correction.task_id,
        taxonomy=correction.taxonomy,
        pattern=correction.pattern,
        fingerprint=correction.fingerprint,
        suggestion=correction.suggestion,
        created_at=correction.created_at,
    )
    try:
        with session.begin_nested():  # the savepoint keeps the caller's transaction usable after a conflict
            session.add(row)
    except IntegrityError:
        return False
    return True


def latest_correction(session: Session, owner_id: str, task_id: str) -> CourseCorrection | None:
    """The newest correction emitted for a task."""
    row = session.scalar(
        select(CourseCorrectionRow)
        .where(CourseCorrectionRow.owner_id == owner_id, CourseCorrectionRow.task_id == task_id)
        .order_by(CourseCorrectionRow.created_at.desc())
        .limit(1)
    )
    if row is None:
        return None
    return CourseCorrection(
        task_id=row.task_id,
        taxonomy=row.taxonomy,
        pattern=row.pattern,
        suggestion=row.suggestion,
        created_at=row.created_at.replace(tzinfo=row.created_at.tzinfo or UTC),  # SQLite drops the zone
    )


def load_cursor(session: Session, name: str) -> str:
    """The sweep's cursor; empty before the first sweep."""
    row = session.get(SweepCursorRow, name)
    return row.cursor if row else ""


def save_cursor(session: Session, name: str, cursor: str) -> None:
    """Remember how far the sweep has read."""
    session.merge(SweepCursorRow(name=name, cursor=cursor))


class SectionSummaryRow(Base):
    """A fast-model assessment of one step range, keyed by its evidence; see `assessments.cache`."""

    __tablename__ = "section_summaries"
    __table_args__ = (
        UniqueConstraint(
            "trace_id",
            "first_step_id",
            "last_step_id",
            "source_hash",
            "context_hash",
            "version",
            name="uq_section_summaries_key",
        ),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    owner_id: Mapped[str] = mapped_column(String(64))
    trace_id: Mapped[str] = mapped_column(String(36))
    source_hash: Mapped[str] = mapped_column(String(64))
    version: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16))
    lease_token: Mapped[str | None] = mapped_column(String(36))
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    body: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    error: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)
    first_step_id: Mapped[str] = mapped_column(String(200))
    last_step_id: Mapped[str] = mapped_column(String(200))
    context_hash: Mapped[str] = mapped_column(String(64))


class TraceCompletionRow(Base):
    """A fast-model completion estimate of a trace, keyed by its sampled evidence; see `assessments.cache`."""

    __tablename__ = "trace_completions"
    __table_args__ = (UniqueConstraint("trace_id", "source_hash", "version", name="uq_trace_completions_key"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    owner_id: Mapped[str] = mapped_column(String(64))
    trace_id: Mapped[str] = mapped_column(String(36))
    source_hash: Mapped[str] = mapped_column(String(64))
    version: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16))
    lease_token: Mapped[str | None] = mapped_column(String(36))
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    body: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    error: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)


def forget_labels(session: Session, trace_id: str) -> None:
    """Drop a trace's kept labels so the next evaluation labels every chunk again."""
    session.execute(delete(ChunkLabelRow).where(ChunkLabelRow.trace_id == trace_id))
