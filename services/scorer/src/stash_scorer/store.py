"""The tables the scorer owns: scoring runs and the jobs that batch them, the scores they publish, the models
the scorer knows as ready, and what the background sweep has seen.

A run is one trace revision scored by one checkpoint; it moves queued → running → succeeded | failed.
A partial unique index allows one active (queued or running) run per trace, model and revision, so two
simultaneous requests for the same thing meet at one run, in one process or across replicas. Only a
queued run can be claimed, and a claim names the job, so a duplicate delivery never scores a trace twice
and a report from another job is refused. A running job holds one of `max_active_batches` slots, kept
unique by another partial index, so replicas together never run more jobs than that.

The functions that write trace and action scores (`replace_scores`, `drop_removed_steps`, `forget_trace`,
`forget_model`) end by giving the owner a new change marker, which tells the gateway its cached SQL
tables are stale.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

from sqlalchemy import (
    BigInteger,
    Boolean,
    CursorResult,
    DateTime,
    Float,
    Index,
    Integer,
    String,
    Table,
    Text,
    delete,
    exists,
    func,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, aliased, mapped_column
from sqlalchemy.sql.dml import Delete, Update

from stash_common import owner_versions
from stash_common.db import UtcDateTime, new_id, utc_now
from stash_common.errors import FailedPrecondition, NotFound

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
QUEUED, RUNNING, SUCCEEDED, FAILED = "queued", "running", "succeeded", "failed"
ACTIVE = (QUEUED, RUNNING)
_ACTIVE_RUN = text("status IN ('queued', 'running')")
_RUNNING_JOB = text("status = 'running'")


class Base(DeclarativeBase):
    """Metadata of the tables the scorer owns."""


class ScoringModelRow(Base):
    """A succeeded reward model the scorer has learned about; action models are scored in the background."""

    __tablename__ = "scoring_models"
    __table_args__ = (
        Index("ix_scoring_models_owner", "owner_id"),
        Index("ix_scoring_models_training_job_key", "training_job_key"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    owner_id: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(200))
    artifact_key: Mapped[str] = mapped_column(String(500))
    scores_actions: Mapped[bool] = mapped_column(Boolean)
    # When every trace of the owner was queued for this model; None until the background sweep has done it.
    backfilled_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    ready_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)
    # The training job that left the checkpoint (`jobs/trainer/<job id>`), once it published its scores.
    training_job_key: Mapped[str | None] = mapped_column(String(500))


class ScoringRunRow(Base):
    """One request to score one trace revision with one checkpoint, and how it went."""

    __tablename__ = "scoring_runs"
    __table_args__ = (
        Index(
            "uq_scoring_runs_active",
            "trace_id",
            "reward_model_id",
            "trace_revision",
            unique=True,
            postgresql_where=_ACTIVE_RUN,
            sqlite_where=_ACTIVE_RUN,
        ),
        Index("ix_scoring_runs_claim", "status", "reward_model_id", "explicit", "created_at"),
        Index("ix_scoring_runs_trace", "owner_id", "trace_id", "created_at"),
        Index("ix_scoring_runs_job", "job_id"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    owner_id: Mapped[str] = mapped_column(String(64))
    trace_id: Mapped[str] = mapped_column(String(36))
    trace_revision: Mapped[int] = mapped_column(BigInteger)
    reward_model_id: Mapped[str] = mapped_column(String(36))
    reward_model_name: Mapped[str] = mapped_column(String(200))
    artifact_key: Mapped[str] = mapped_column(String(500))
    status: Mapped[str] = mapped_column(String(20), default=QUEUED)
    # Asked for by a person (ScoreTrace), not queued by the background sweep: served first within its batch.
    explicit: Mapped[bool] = mapped_column(Boolean, default=False)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    # True when retrying cannot help; the sweep then leaves the failed run alone.
    permanent: Mapped[bool] = mapped_column(Boolean, default=False)
    error: Mapped[str | None] = mapped_column(Text)
    job_id: Mapped[str | None] = mapped_column(String(36))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # The shared evaluator release this run scores with; None for a personal model's run.
    release_number: Mapped[int | None] = mapped_column(Integer)


class ScoringJobRow(Base):
    """One batch: up to `batch_traces` runs of one checkpoint, scored by one worker."""

    __tablename__ = "scoring_jobs"
    __table_args__ = (
        Index(
            "uq_scoring_jobs_running_slot",
            "slot",
            unique=True,
            postgresql_where=_RUNNING_JOB,
            sqlite_where=_RUNNING_JOB,
        ),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    owner_id: Mapped[str] = mapped_column(String(64))
    reward_model_id: Mapped[str] = mapped_column(String(36))
    status: Mapped[str] = mapped_column(String(20), default=RUNNING)
    slot: Mapped[int] = mapped_column(Integer)
    run_count: Mapped[int] = mapped_column(Integer, default=0)
    exit_code: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Renewed every few seconds by the replica watching the job's worker; one that died lets it run out.
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # The shared evaluator release the job scores with; None for a personal model's job.
    release_number: Mapped[int | None] = mapped_column(Integer)


class TraceScoreRow(Base):
    """A trace's raw reward from one model: the latest published one."""

    __tablename__ = "trace_scores"
    __table_args__ = (Index("ix_trace_scores_owner_trace", "owner_id", "trace_id"),)

    reward_model_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    trace_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    owner_id: Mapped[str] = mapped_column(String(64))
    reward_model_name: Mapped[str] = mapped_column(String(200))
    trace_revision: Mapped[int] = mapped_column(BigInteger)
    score: Mapped[float] = mapped_column(Float)
    scoring_run_id: Mapped[str] = mapped_column(String(36))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)
    # The shared evaluator release that published the score; None for a personal model's.
    release_number: Mapped[int | None] = mapped_column(Integer)


class ActionScoreRow(Base):
    """One action's learned score from one model, keyed by the immutable step id."""

    __tablename__ = "action_scores"
    __table_args__ = (
        Index("ix_action_scores_trace", "trace_id", "reward_model_id"),
        Index("ix_action_scores_release", "owner_id", "trace_id", "release_number"),
    )

    reward_model_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    step_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    owner_id: Mapped[str] = mapped_column(String(64))
    trace_id: Mapped[str] = mapped_column(String(36))
    step_index: Mapped[int] = mapped_column(Integer)
    reward_model_name: Mapped[str] = mapped_column(String(200))
    trace_revision: Mapped[int] = mapped_column(BigInteger)
    score: Mapped[float] = mapped_column(Float)
    credit: Mapped[float] = mapped_column(Float)
    scoring_run_id: Mapped[str] = mapped_column(String(36))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)
    # The shared evaluator release that published the score; None for a personal model's.
    release_number: Mapped[int | None] = mapped_column(Integer)


class EvaluatorReleaseRow(Base):
    """A shared evaluator release as the trainer published it; the current one was released last."""

    __tablename__ = "evaluator_releases"
    __table_args__ = (Index("ix_evaluator_releases_released_at", "released_at"),)

    number: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_key: Mapped[str] = mapped_column(String(500))
    artifact_key: Mapped[str] = mapped_column(String(500))
    # When the release, or the latest rollback to it, took effect (the trainer's clock).
    released_at: Mapped[datetime] = mapped_column(UtcDateTime)
    published_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now)
    # When every trace was queued for it since it last became current; None until the backfill has done it.
    backfilled_at: Mapped[datetime | None] = mapped_column(UtcDateTime)

    @property
    def model_id(self) -> str:
        """The model id its runs and scores carry."""
        return release_model_id(self.number)

    @property
    def name(self) -> str:
        """The model name its runs and scores carry."""
        return f"shared evaluator release {self.number}"


def release_model_id(number: int) -> str:
    """The model id of release `number`'s runs and scores."""
    return f"evaluator-release-{number}"


class PendingChangeRow(Base):
    """A changed trace the sweep has seen and not acted on yet (it waits for its owner to go idle)."""

    __tablename__ = "scoring_pending_changes"
    __table_args__ = (Index("ix_scoring_pending_changes_owner", "owner_id", "seen_at"),)

    trace_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    owner_id: Mapped[str] = mapped_column(String(64))
    revision: Mapped[int] = mapped_column(BigInteger)
    seen_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)
    # When the trace first waited: a newer revision moves `seen_at`, never this.
    first_seen_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)


class SweepCursorRow(Base):
    """How far a sweep has read (ingest's change list, the check for deleted traces)."""

    __tablename__ = "scoring_sweep_cursors"

    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    cursor: Mapped[str] = mapped_column(Text)


class OwnerVersionRow(Base):
    """An owner's change marker for the gateway's SQL queries (see `stash_common.owner_rows`)."""

    # Typed as the Table it is (SQLAlchemy types it as any FromClause): the markers are written with Core.
    __table__: ClassVar[Table]
    __tablename__ = "scorer_owner_versions"

    owner_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    version: Mapped[str] = mapped_column(String(36))


def touch_owner(session: Session, owner_id: str) -> None:
    """A new change marker for the owner: the last write of a transaction that changed their scores."""
    owner_versions.touch_owners(session, OwnerVersionRow.__table__, [owner_id])


@dataclass(frozen=True)
class PublishedAction:
    """One validated action score, ready to store."""

    step_id: str
    step_index: int
    score: float
    credit: float


# --- runs -------------------------------------------------------------------------------------------


def find_run(session: Session, owner_id: str, run_id: str) -> ScoringRunRow:
    """The owner's run; another owner's is simply not found."""
    row = session.get(ScoringRunRow, run_id)
    if row is None or row.owner_id != owner_id:
        raise NotFound(f"scoring run {run_id} not found")
    return row


def reporting_run(session: Session, owner_id: str, run_id: str, job_id: str) -> ScoringRunRow:
    """The run a worker reports on, locked: running in that job, or settled by it (a repeated report).

    A report from any other job is refused.
    """
    row = session.get(ScoringRunRow, run_id, with_for_update=True)
    if row is None or row.owner_id != owner_id:
        raise NotFound(f"scoring run {run_id} not found")
    if row.job_id != job_id or row.status not in (RUNNING, SUCCEEDED, FAILED):
        raise FailedPrecondition(f"scoring run {run_id} is {row.status} and no longer running in job {job_id}")
    return row


def covering_run(
    session: Session, trace_id: str, model_id: str, revision: int, artifact_key: str
) -> ScoringRunRow | None:
    """The active run of this trace revision and model, else the newest succeeded one with this checkpoint."""
    query = select(ScoringRunRow).where(
        ScoringRunRow.trace_id == trace_id,
        ScoringRunRow.reward_model_id == model_id,
        ScoringRunRow.trace_revision == revision,
    )
    active = session.scalars(query.where(ScoringRunRow.status.in_(ACTIVE))).first()
    if active is not None:
        return active
    succeeded = query.where(ScoringRunRow.status == SUCCEEDED, ScoringRunRow.artifact_key == artifact_key)
    return session.scalars(succeeded.order_by(ScoringRunRow.created_at.desc())).first()


def new_run(
    model: ScoringModelRow, trace_id: str, revision: int, explicit: bool, status: str = QUEUED
) -> ScoringRunRow:
    """A run of `model` on one revision of one of its owner's traces."""
    return ScoringRunRow(
        id=new_id(),
        owner_id=model.owner_id,
        trace_id=trace_id,
        trace_revision=revision,
        reward_model_id=model.id,
        reward_model_name=model.name,
        artifact_key=model.artifact_key,
        status=status,
        explicit=explicit,
        attempts=0,
        permanent=False,
        created_at=utc_now(),
    )


def has_run(session: Session, trace_id: str, model_id: str, revision: int) -> bool:
    """Whether any run (in any state) covers this trace revision and model."""
    query = select(ScoringRunRow.id).where(
        ScoringRunRow.trace_id == trace_id,
        ScoringRunRow.reward_model_id == model_id,
        ScoringRunRow.trace_revision == revision,
    )
    return session.scalars(query.limit(1)).first() is not None


def covered_revisions(session: Session, model_id: str) -> set[tuple[str, int]]:
    """The (trace, revision) pairs a model has scored or is scoring."""
    query = select(ScoringRunRow.trace_id, ScoringRunRow.trace_revision).where(
        ScoringRunRow.reward_model_id == model_id, ScoringRunRow.status.in_((*ACTIVE, SUCCEEDED))
    )
    return {(trace_id, revision) for trace_id, revision in session.execute(query)}


def latest_runs(session: Session, owner_id: str, trace_id: str) -> list[ScoringRunRow]:
    """The newest run of each of the owner's models on the owner's trace, by model name."""
    rows = session.scalars(
        select(ScoringRunRow)
        .where(
            ScoringRunRow.owner_id == owner_id,
            ScoringRunRow.trace_id == trace_id,
            ScoringRunRow.release_number.is_(None),
        )
        .order_by(ScoringRunRow.created_at.desc(), ScoringRunRow.id)
    )
    latest: dict[str, ScoringRunRow] = {}
    for row in rows:
        latest.setdefault(row.reward_model_id, row)
    return sorted(latest.values(), key=lambda row: (row.reward_model_name, row.reward_model_id))


def finish_run(row: ScoringRunRow, status: str, error: str | None = None, permanent: bool = False) -> None:
    """Settle a run."""
    row.status, row.error, row.permanent, row.finished_at = status, error, permanent, utc_now()


def requeue(session: Session, run_ids: Collection[str]) -> None:
    """Put claimed runs back in the queue, their attempt not counted (a peer was out of reach)."""
    session.execute(
        update(ScoringRunRow)
        .where(ScoringRunRow.id.in_(run_ids), ScoringRunRow.status == RUNNING)
        .values(status=QUEUED, job_id=None, started_at=None, attempts=ScoringRunRow.attempts - 1)
    )


def retry_failed(session: Session, max_attempts: int) -> int:
    """Queue again every retryable failed run that is still its trace and model's newest, up to `max_attempts`."""
    newer = aliased(ScoringRunRow)
    superseded = exists().where(
        newer.trace_id == ScoringRunRow.trace_id,
        newer.reward_model_id == ScoringRunRow.reward_model_id,
        newer.created_at > ScoringRunRow.created_at,
    )
    retryable = select(ScoringRunRow.id).where(
        ScoringRunRow.status == FAILED,
        ScoringRunRow.permanent.is_(False),
        ScoringRunRow.attempts < max_attempts,
        ~superseded,
    )
    run_ids = list(session.scalars(retryable))
    if run_ids:
        session.execute(
            update(ScoringRunRow)
            .where(ScoringRunRow.id.in_(run_ids))
            .values(status=QUEUED, error=None, job_id=None, started_at=None, finished_at=None)
        )
    return len(run_ids)


# --- claiming ----------------------------------------------------------------------------------------


def free_slot(session: Session, max_active: int) -> int | None:
    """A job slot no running job holds, or None when `max_active` jobs are running."""
    used = set(session.scalars(select(ScoringJobRow.slot).where(ScoringJobRow.status == RUNNING)))
    return next((slot for slot in range(max_active) if slot not in used), None)


@dataclass(frozen=True)
class BatchKey:
    """What one batch holds: queued runs of one checkpoint for one owner (a release scores every owner's traces)."""

    model_id: str
    owner_id: str
    release_number: int | None


def next_batch(session: Session) -> BatchKey | None:
    """The runs to serve next: the oldest explicit request first; otherwise personal models and the shared
    evaluator take turns, batch by batch (the kind the last job was not goes first, the other when it has none
    queued), and within each kind owners take turns (`_next_background`), so neither a release's rescoring of
    every trace nor one owner's backlog of thousands of traces holds back anybody else's scores."""
    queued = select(ScoringRunRow.reward_model_id, ScoringRunRow.owner_id, ScoringRunRow.release_number).where(
        ScoringRunRow.status == QUEUED
    )
    explicit = queued.where(ScoringRunRow.explicit.is_(True)).order_by(ScoringRunRow.created_at, ScoringRunRow.id)
    if (row := session.execute(explicit.limit(1)).first()) is not None:
        return BatchKey(*row)
    last_job = select(ScoringJobRow.release_number).order_by(ScoringJobRow.created_at.desc(), ScoringJobRow.id)
    last = session.execute(last_job.limit(1)).first()
    last_was_personal = last is not None and last.release_number is None
    for shared in (last_was_personal, not last_was_personal):
        if (key := _next_background(session, shared)) is not None:
            return key
    return None


def _next_background(session: Session, shared: bool) -> BatchKey | None:
    """The personal (or shared) background runs to serve next: the owner whose last batch of that kind started
    longest ago, or never, then its oldest queued run."""
    kind = ScoringRunRow.release_number.is_not(None) if shared else ScoringRunRow.release_number.is_(None)
    job_kind = ScoringJobRow.release_number.is_not(None) if shared else ScoringJobRow.release_number.is_(None)
    waiting = (
        select(
            ScoringRunRow.reward_model_id,
            ScoringRunRow.owner_id,
            ScoringRunRow.release_number,
            func.min(ScoringRunRow.created_at).label("oldest"),
        )
        .where(ScoringRunRow.status == QUEUED, kind)
        .group_by(ScoringRunRow.reward_model_id, ScoringRunRow.owner_id, ScoringRunRow.release_number)
        .subquery()
    )
    served = (
        select(ScoringJobRow.owner_id, func.max(ScoringJobRow.created_at).label("last_served"))
        .where(job_kind)
        .group_by(ScoringJobRow.owner_id)
        .subquery()
    )
    query = (
        select(waiting.c.reward_model_id, waiting.c.owner_id, waiting.c.release_number)
        .outerjoin(served, served.c.owner_id == waiting.c.owner_id)
        .order_by(served.c.last_served.asc().nulls_first(), waiting.c.oldest, waiting.c.reward_model_id)
    )
    row = session.execute(query.limit(1)).first()
    return None if row is None else BatchKey(*row)


def queued_runs(session: Session, key: BatchKey, limit: int) -> list[ScoringRunRow]:
    """Up to `limit` queued runs of one model for one owner, explicit ones first, at most one per trace; a
    personal model's oldest first, a release's newest first (its backfill queues traces in the order ingest
    last changed them, and a trace imported meanwhile goes before that backlog)."""
    queued_at = ScoringRunRow.created_at if key.release_number is None else ScoringRunRow.created_at.desc()
    rows = session.scalars(
        select(ScoringRunRow)
        .where(
            ScoringRunRow.status == QUEUED,
            ScoringRunRow.reward_model_id == key.model_id,
            ScoringRunRow.owner_id == key.owner_id,
        )
        .order_by(ScoringRunRow.explicit.desc(), queued_at, ScoringRunRow.id)
        .limit(limit * 4)
    )
    by_trace: dict[str, ScoringRunRow] = {}
    for row in rows:
        by_trace.setdefault(row.trace_id, row)
    return list(by_trace.values())[:limit]


def open_job(
    session: Session, key: BatchKey, slot: int, run_ids: Sequence[str], lease: timedelta
) -> ScoringJobRow | None:
    """Claim queued runs into a new job on `slot`, leased for `lease`; None when another claimer took them all."""
    now = utc_now()
    job = ScoringJobRow(
        id=new_id(),
        owner_id=key.owner_id,
        reward_model_id=key.model_id,
        release_number=key.release_number,
        slot=slot,
        created_at=now,
        lease_until=now + lease,
    )
    session.add(job)
    session.flush()
    claimed = _changed(
        session,
        update(ScoringRunRow)
        .where(ScoringRunRow.id.in_(run_ids), ScoringRunRow.status == QUEUED)
        .values(status=RUNNING, job_id=job.id, started_at=utc_now(), attempts=ScoringRunRow.attempts + 1),
    )
    if claimed == 0:
        session.delete(job)
        return None
    job.run_count = claimed
    return job


def job_runs(session: Session, job_id: str) -> list[ScoringRunRow]:
    """The runs still running in a job in the order they were claimed: explicit ones first, then a personal
    model's oldest first, a release's newest first."""
    query = select(ScoringRunRow).where(ScoringRunRow.job_id == job_id, ScoringRunRow.status == RUNNING)
    rows = list(session.scalars(query.order_by(ScoringRunRow.explicit.desc(), ScoringRunRow.created_at)))
    if rows and rows[0].release_number is not None:
        rows.sort(key=lambda row: row.created_at, reverse=True)  # a release's runs are never explicit
    return rows


def finish_job(session: Session, job_id: str, exit_code: int | None, unreported_error: str) -> list[str]:
    """End a job: its runs that never reported fail with `unreported_error`; returns their ids.

    A job succeeds when its worker exited with code 0 after reporting every run; `exit_code` is None
    when the worker was stopped (overdue, or the scorer shutting down).
    """
    job = session.get(ScoringJobRow, job_id, with_for_update=True)
    if job is None or job.status != RUNNING:
        return []
    unreported = job_runs(session, job_id)
    for row in unreported:
        finish_run(row, FAILED, unreported_error)
    job.status = SUCCEEDED if exit_code == 0 and not unreported else FAILED
    job.exit_code, job.finished_at = exit_code, utc_now()
    job.error = unreported_error if job.status == FAILED else None
    return [row.id for row in unreported]


def running_job_ids(session: Session) -> list[str]:
    """Every running job (its worker runs here, on another replica, or nowhere any more)."""
    return list(session.scalars(select(ScoringJobRow.id).where(ScoringJobRow.status == RUNNING)))


def renew_job_leases(session: Session, job_ids: Collection[str], lease: timedelta) -> None:
    """Extend the leases of the running jobs this replica watches."""
    if job_ids:
        session.execute(
            update(ScoringJobRow)
            .where(ScoringJobRow.id.in_(list(job_ids)), ScoringJobRow.status == RUNNING)
            .values(lease_until=utc_now() + lease)
        )


def take_expired_jobs(session: Session, held: Collection[str], lease: timedelta) -> list[str]:
    """Take over the running jobs whose lease ran out (not `held` here), leased again so no other replica does."""
    now = utc_now()
    query = select(ScoringJobRow).where(ScoringJobRow.status == RUNNING, ScoringJobRow.lease_until < now)
    if held:
        query = query.where(ScoringJobRow.id.not_in(list(held)))
    expired = list(session.scalars(query.with_for_update(skip_locked=True)))
    for job in expired:
        job.lease_until = now + lease
    return [job.id for job in expired]


def overdue_jobs(session: Session, started_before: datetime) -> list[str]:
    """Running jobs started before the cutoff (their worker is stuck, or its service went away)."""
    query = select(ScoringJobRow.id).where(ScoringJobRow.status == RUNNING, ScoringJobRow.created_at < started_before)
    return list(session.scalars(query))


# --- scores ------------------------------------------------------------------------------------------


def replace_scores(
    session: Session, run: ScoringRunRow, actions: Sequence[PublishedAction], trace_score: float | None
) -> None:
    """Publish a run's scores in place of that trace's previous scores from that model."""
    key = (run.reward_model_id, run.trace_id)
    session.execute(delete(ActionScoreRow).where(*_of(ActionScoreRow, *key)))
    session.execute(delete(TraceScoreRow).where(*_of(TraceScoreRow, *key)))
    now = utc_now()
    common: dict[str, Any] = {
        "reward_model_id": run.reward_model_id,
        "owner_id": run.owner_id,
        "trace_id": run.trace_id,
        "reward_model_name": run.reward_model_name,
        "trace_revision": run.trace_revision,
        "scoring_run_id": run.id,
        "created_at": now,
        "release_number": run.release_number,
    }
    session.add_all(
        ActionScoreRow(
            **common, step_id=action.step_id, step_index=action.step_index, score=action.score, credit=action.credit
        )
        for action in actions
    )
    if trace_score is not None:
        session.add(TraceScoreRow(**common, score=trace_score))
    touch_owner(session, run.owner_id)


def _of(table: type[ActionScoreRow] | type[TraceScoreRow], model_id: str, trace_id: str) -> tuple[Any, Any]:
    return table.reward_model_id == model_id, table.trace_id == trace_id


def trace_scores(session: Session, owner_id: str, trace_id: str) -> list[TraceScoreRow]:
    """The owner's trace score from each of the owner's models, by model name."""
    query = select(TraceScoreRow).where(
        TraceScoreRow.owner_id == owner_id, TraceScoreRow.trace_id == trace_id, TraceScoreRow.release_number.is_(None)
    )
    return list(session.scalars(query.order_by(TraceScoreRow.reward_model_name, TraceScoreRow.reward_model_id)))


def action_scores(session: Session, owner_id: str, trace_id: str, model_id: str | None) -> list[ActionScoreRow]:
    """The owner's action scores of a trace from the owner's models (or one of them), by model name, then in step
    order."""
    query = select(ActionScoreRow).where(
        ActionScoreRow.owner_id == owner_id,
        ActionScoreRow.trace_id == trace_id,
        ActionScoreRow.release_number.is_(None),
    )
    if model_id is not None:
        query = query.where(ActionScoreRow.reward_model_id == model_id)
    order = (ActionScoreRow.reward_model_name, ActionScoreRow.reward_model_id, ActionScoreRow.step_index)
    return list(session.scalars(query.order_by(*order)))


def latest_trace_scores(session: Session, owner_id: str, trace_ids: Sequence[str]) -> dict[str, TraceScoreRow]:
    """The newest trace score from the owner's models of each listed trace that has one."""
    query = select(TraceScoreRow).where(
        TraceScoreRow.owner_id == owner_id,
        TraceScoreRow.trace_id.in_(trace_ids),
        TraceScoreRow.release_number.is_(None),
    )
    latest: dict[str, TraceScoreRow] = {}
    for row in session.scalars(query.order_by(TraceScoreRow.created_at.desc(), TraceScoreRow.reward_model_id)):
        latest.setdefault(row.trace_id, row)
    return latest


def has_action_scores(session: Session, owner_id: str, trace_id: str) -> bool:
    """Whether any model has published action scores for the trace."""
    query = select(ActionScoreRow.step_id).where(
        ActionScoreRow.owner_id == owner_id, ActionScoreRow.trace_id == trace_id
    )
    return session.scalars(query.limit(1)).first() is not None


def drop_removed_steps(session: Session, owner_id: str, trace_id: str, step_ids: Collection[str]) -> int:
    """Delete the action scores of the trace's steps that no longer exist; returns how many."""
    statement = delete(ActionScoreRow).where(
        ActionScoreRow.owner_id == owner_id,
        ActionScoreRow.trace_id == trace_id,
        ActionScoreRow.step_id.not_in(step_ids),
    )
    dropped = _changed(session, statement)
    if dropped:
        touch_owner(session, owner_id)
    return dropped


def forget_trace(session: Session, owner_id: str, trace_id: str) -> None:
    """Drop everything the scorer keeps about a deleted trace."""
    for table in (ActionScoreRow, TraceScoreRow, ScoringRunRow, PendingChangeRow):
        session.execute(delete(table).where(table.owner_id == owner_id, table.trace_id == trace_id))
    touch_owner(session, owner_id)


def forget_model(session: Session, owner_id: str, model_id: str) -> None:
    """Drop everything the scorer keeps about a deleted model of the owner: its scores, runs and readiness."""
    for table in (ActionScoreRow, TraceScoreRow, ScoringRunRow):
        session.execute(delete(table).where(table.owner_id == owner_id, table.reward_model_id == model_id))
    session.execute(delete(ScoringModelRow).where(ScoringModelRow.owner_id == owner_id, ScoringModelRow.id == model_id))
    touch_owner(session, owner_id)


def scored_traces_after(session: Session, after_trace_id: str, limit: int) -> list[tuple[str, str]]:
    """(owner, trace) of traces with scoring runs, in trace id order after `after_trace_id`."""
    query = (
        select(ScoringRunRow.owner_id, ScoringRunRow.trace_id)
        .where(ScoringRunRow.trace_id > after_trace_id)
        .group_by(ScoringRunRow.owner_id, ScoringRunRow.trace_id)
        .order_by(ScoringRunRow.trace_id)
        .limit(limit)
    )
    return [(owner_id, trace_id) for owner_id, trace_id in session.execute(query)]


# --- models ------------------------------------------------------------------------------------------


def remember_model(
    session: Session,
    model_id: str,
    owner_id: str,
    name: str,
    artifact_key: str,
    scores_actions: bool,
    backfill: bool = True,
) -> ScoringModelRow:
    """Record a succeeded model as ready. A model seen for the first time is backfilled by the sweep, or, with
    `backfill` False, marked as done until `request_backfill` asks for it."""
    row = session.get(ScoringModelRow, model_id)
    if row is None:
        now = utc_now()
        row = ScoringModelRow(id=model_id, owner_id=owner_id, ready_at=now, backfilled_at=None if backfill else now)
        session.add(row)
    row.name, row.artifact_key, row.scores_actions = name, artifact_key, scores_actions
    return row


def note_training_job(session: Session, model_id: str, job_key: str) -> None:
    """Remember which training job left the model's checkpoint."""
    session.execute(update(ScoringModelRow).where(ScoringModelRow.id == model_id).values(training_job_key=job_key))


def ready_action_models(session: Session, owner_id: str) -> list[ScoringModelRow]:
    """The owner's models that score actions."""
    query = select(ScoringModelRow).where(ScoringModelRow.owner_id == owner_id, ScoringModelRow.scores_actions)
    return list(session.scalars(query.order_by(ScoringModelRow.ready_at)))


def models_to_backfill(session: Session) -> list[ScoringModelRow]:
    """Action models whose owner's traces have not all been queued yet."""
    query = select(ScoringModelRow).where(ScoringModelRow.scores_actions, ScoringModelRow.backfilled_at.is_(None))
    return list(session.scalars(query.order_by(ScoringModelRow.ready_at)))


def request_backfill(session: Session, model_id: str) -> None:
    """Have the sweep queue every trace of the model's owner again (those it has not scored yet)."""
    session.execute(update(ScoringModelRow).where(ScoringModelRow.id == model_id).values(backfilled_at=None))


# --- the shared evaluator's releases ------------------------------------------------------------------


def find_release(session: Session, number: int) -> EvaluatorReleaseRow | None:
    """Release `number`, if it was ever published."""
    return session.get(EvaluatorReleaseRow, number)


def current_release(session: Session) -> EvaluatorReleaseRow | None:
    """The release published (or rolled back to) last; None before the first."""
    query = select(EvaluatorReleaseRow).order_by(
        EvaluatorReleaseRow.released_at.desc(), EvaluatorReleaseRow.number.desc()
    )
    return session.scalars(query.limit(1)).first()


def release_order(session: Session) -> dict[int, int]:
    """Release number → rank, 0 for the current one, then the others from the most recently current."""
    query = select(EvaluatorReleaseRow.number).order_by(
        EvaluatorReleaseRow.released_at.desc(), EvaluatorReleaseRow.number.desc()
    )
    return {number: rank for rank, number in enumerate(session.scalars(query))}


def checkpoint_of_training_job(session: Session, job_key: str) -> str | None:
    """The checkpoint archive of the personal model whose training job was `job_key`, if the scorer knows it."""
    query = select(ScoringModelRow.artifact_key).where(ScoringModelRow.training_job_key == job_key)
    return session.scalars(query.limit(1)).first()


def retire_release_runs(session: Session, keep_number: int) -> int:
    """Delete the queued runs of every release but `keep_number`, and leave their failed runs unretried (nothing
    scores with a superseded release); returns how many were deleted."""
    superseded = (ScoringRunRow.release_number.is_not(None), ScoringRunRow.release_number != keep_number)
    session.execute(update(ScoringRunRow).where(ScoringRunRow.status == FAILED, *superseded).values(permanent=True))
    return _changed(session, delete(ScoringRunRow).where(ScoringRunRow.status == QUEUED, *superseded))


def new_release_run(release: EvaluatorReleaseRow, owner_id: str, trace_id: str, revision: int) -> ScoringRunRow:
    """A background run of `release` on one revision of one owner's trace."""
    return ScoringRunRow(
        id=new_id(),
        owner_id=owner_id,
        trace_id=trace_id,
        trace_revision=revision,
        reward_model_id=release.model_id,
        reward_model_name=release.name,
        artifact_key=release.artifact_key,
        release_number=release.number,
        status=QUEUED,
        explicit=False,
        attempts=0,
        permanent=False,
        created_at=utc_now(),
    )


def release_to_backfill(session: Session) -> EvaluatorReleaseRow | None:
    """The current release while its backfill has not queued every trace yet."""
    release = current_release(session)
    return release if release is not None and release.backfilled_at is None else None


def finish_release_backfill(session: Session, number: int) -> None:
    """Mark release `number`'s backfill as done (it holds until the release becomes current again)."""
    session.execute(
        update(EvaluatorReleaseRow).where(EvaluatorReleaseRow.number == number).values(backfilled_at=utc_now())
    )


@dataclass(frozen=True)
class SharedScores:
    """What one release published for one trace: its trace score (if any) and its action scores in step order."""

    release_number: int
    trace_score: TraceScoreRow | None
    actions: tuple[ActionScoreRow, ...]

    @property
    def scored_at(self) -> datetime:
        """When the release published them (one run publishes a trace's scores together)."""
        return self.trace_score.created_at if self.trace_score is not None else self.actions[0].created_at

    @property
    def trace_revision(self) -> int:
        """The trace revision scored."""
        return self.trace_score.trace_revision if self.trace_score is not None else self.actions[0].trace_revision


def shown_shared_scores(
    session: Session, owner_id: str, trace_ids: Sequence[str], with_actions: bool
) -> dict[str, SharedScores]:
    """Per trace, the scores of the current release when it scored the trace, else of the release most recently
    current that did; traces no release scored are absent. Action scores only `with_actions`."""
    order = release_order(session)
    traces = _shared_rows(session, TraceScoreRow, owner_id, trace_ids)
    actions = _shared_rows(session, ActionScoreRow, owner_id, trace_ids) if with_actions else {}
    shown: dict[str, SharedScores] = {}
    for trace_id in trace_ids:
        scored = {number for (trace, number) in (*traces, *actions) if trace == trace_id}
        if not scored:
            continue
        number = min(scored, key=lambda item: order.get(item, len(order)))
        key = (trace_id, number)
        trace_score = traces[key][0] if key in traces else None
        action_rows = sorted(actions.get(key, []), key=lambda row: row.step_index)
        shown[trace_id] = SharedScores(number, trace_score, tuple(action_rows))
    return shown


def _shared_rows(
    session: Session, table: type[ActionScoreRow] | type[TraceScoreRow], owner_id: str, trace_ids: Sequence[str]
) -> dict[tuple[str, int], list[Any]]:
    query = select(table).where(
        table.owner_id == owner_id, table.trace_id.in_(trace_ids), table.release_number.is_not(None)
    )
    rows: dict[tuple[str, int], list[Any]] = {}
    for row in session.scalars(query):
        rows.setdefault((row.trace_id, row.release_number), []).append(row)  # type: ignore[attr-defined]
    return rows


def latest_release_run(session: Session, owner_id: str, trace_id: str, number: int) -> ScoringRunRow | None:
    """The newest run of release `number` on the owner's trace."""
    query = select(ScoringRunRow).where(
        ScoringRunRow.owner_id == owner_id,
        ScoringRunRow.trace_id == trace_id,
        ScoringRunRow.release_number == number,
    )
    return session.scalars(query.order_by(ScoringRunRow.created_at.desc()).limit(1)).first()


# --- the background sweep ----------------------------------------------------------------------------


def note_change(session: Session, owner_id: str, trace_id: str, revision: int) -> None:
    """Remember a changed trace; a newer revision restarts its owner's debounce."""
    row = session.get(PendingChangeRow, trace_id)
    if row is None:
        now = utc_now()
        session.add(
            PendingChangeRow(trace_id=trace_id, owner_id=owner_id, revision=revision, seen_at=now, first_seen_at=now)
        )
    elif revision > row.revision:
        row.revision, row.seen_at = revision, utc_now()


def due_changes(session: Session, idle_since: datetime, waiting_since: datetime) -> list[PendingChangeRow]:
    """The pending changes of every owner that has made no change since `idle_since`, or that has had a
    change waiting since `waiting_since` (an owner who never stops changing traces is scored all the same)."""
    idle_owners = (
        select(PendingChangeRow.owner_id)
        .group_by(PendingChangeRow.owner_id)
        .having(
            or_(
                func.max(PendingChangeRow.seen_at) <= idle_since,
                func.min(PendingChangeRow.first_seen_at) <= waiting_since,
            )
        )
    )
    query = select(PendingChangeRow).where(PendingChangeRow.owner_id.in_(idle_owners))
    return list(session.scalars(query.order_by(PendingChangeRow.owner_id, PendingChangeRow.seen_at)))


def settle_change(session: Session, trace_id: str, revision: int) -> None:
    """Forget a pending change once acted on, unless a newer revision arrived meanwhile."""
    session.execute(
        delete(PendingChangeRow).where(PendingChangeRow.trace_id == trace_id, PendingChangeRow.revision <= revision)
    )


def load_cursor(session: Session, name: str) -> str:
    """A sweep's cursor; empty before its first pass."""
    row = session.get(SweepCursorRow, name)
    return row.cursor if row else ""


def save_cursor(session: Session, name: str, cursor: str) -> None:
    """Remember how far a sweep has read."""
    session.merge(SweepCursorRow(name=name, cursor=cursor))


def _changed(session: Session, statement: Update | Delete) -> int:
    """How many rows an UPDATE or DELETE changed."""
    result = session.execute(statement)
    assert isinstance(result, CursorResult)  # DML without RETURNING answers with a cursor result
    return result.rowcount
