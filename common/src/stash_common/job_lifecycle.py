"""The lifecycle a job-backed row shares (a reward model's training, a GEPA run): queued → running → settled.

Only a queued row can be claimed, so a duplicate delivery cannot start it twice; each claim gets a
new `job_id`, and reports from an older launch are refused. A failed row can be queued again with
the same id. A recovery sweep fails claims whose job never started and jobs that overran. The
columns come from `JobColumns`, mixed into each service's own declarative class; each service keeps
its own table and migration.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy import JSON, DateTime, String, Text, select, update
from sqlalchemy.orm import Mapped, Session, mapped_column

from stash_common.db import new_id, utc_now
from stash_common.errors import FailedPrecondition, NotFound

QUEUED, RUNNING, SUCCEEDED, FAILED = "queued", "running", "succeeded", "failed"


class JobColumns:
    """The lifecycle columns of a job-backed row."""

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    owner_id: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(20), default=QUEUED)
    job_id: Mapped[str | None] = mapped_column(String(36))
    progress: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)
    claimed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


Row = TypeVar("Row", bound=JobColumns)


def find(session: Session, kind: type[Row], owner_id: str, row_id: str, noun: str) -> Row:
    """The owner's row; another owner's is simply not found (`noun` names it: "reward model", "GEPA run")."""
    row = session.get(kind, row_id)
    if row is None or row.owner_id != owner_id:
        raise NotFound(f"{noun} {row_id} not found")
    return row


def owned(session: Session, kind: type[Row], owner_id: str) -> list[Row]:
    """The owner's rows, newest first."""
    query = select(kind).where(kind.owner_id == owner_id).order_by(kind.created_at.desc(), kind.id)
    return list(session.scalars(query))


def queued_ids(session: Session, kind: type[Row], limit: int) -> list[str]:
    """The oldest queued rows."""
    query = select(kind.id).where(kind.status == QUEUED).order_by(kind.created_at)
    return list(session.scalars(query.limit(limit)))


def claim(session: Session, kind: type[Row], row_id: str) -> str | None:
    """Move a queued row to running under a new job id; None when another claimer won."""
    job_id = new_id()
    claimed = session.execute(
        update(kind)
        .where(kind.id == row_id, kind.status == QUEUED)
        .values(status=RUNNING, job_id=job_id, claimed_at=utc_now(), progress={"stage": "preparing"})
    )
    return job_id if claimed.rowcount == 1 else None  # type: ignore[attr-defined]


def requeue(session: Session, kind: type[Row], owner_id: str, row_id: str, noun: str) -> Row:
    """Queue a failed row again under its id, its lifecycle fields reset (the caller resets its results)."""
    row = find(session, kind, owner_id, row_id, noun)
    if row.status != FAILED:
        raise FailedPrecondition(f"{noun} {row_id} is {row.status}; only a failed {noun} can be retried")
    row.status, row.error, row.job_id, row.progress = QUEUED, None, None, {}
    row.claimed_at = row.started_at = row.finished_at = None
    return row


def running_job(session: Session, kind: type[Row], row_id: str, job_id: str, noun: str) -> Row:
    """The running row of this launch, locked; a report from a superseded or finished launch is refused."""
    row = session.get(kind, row_id, with_for_update=True)
    if row is None:
        raise NotFound(f"{noun} {row_id} not found")
    if row.status != RUNNING or row.job_id != job_id:
        raise FailedPrecondition(f"job {job_id} of {noun} {row_id} is no longer running")
    return row


def finish(row: JobColumns, status: str, error: str | None = None) -> None:
    """Settle a running row."""
    row.status, row.error, row.finished_at = status, error, utc_now()


def fail_stale(session: Session, kind: type[Row], submit_timeout: timedelta, job_timeout: timedelta) -> list[str]:
    """Fail interrupted submissions (claimed, never started) and overdue jobs; returns their ids."""
    now = utc_now()
    failed = []
    for row in session.scalars(select(kind).where(kind.status == RUNNING)):
        if row.started_at is None and row.claimed_at is not None and row.claimed_at < now - submit_timeout:
            finish(row, FAILED, f"the job was interrupted before it started (over {_minutes(submit_timeout)}); retry")
        elif row.started_at is not None and row.started_at < now - job_timeout:
            finish(row, FAILED, f"the job did not finish within {_minutes(job_timeout)}; retry")
        else:
            continue
        failed.append(row.id)
    return failed


def _minutes(span: timedelta) -> str:
    return f"{span.total_seconds() / 60:g} minutes"
