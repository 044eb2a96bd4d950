"""The lifecycle a job-backed row shares (a reward model's training, a GEPA run): queued → running → settled.

Only a queued row can be claimed, so a duplicate delivery cannot start it twice; each claim gets a
new `job_id`, and reports from an older launch are refused. A failed row can be queued again with
the same id. The replica that claimed a row leases it (`lease_until`) and renews the lease every few
seconds while it prepares the job and watches its worker, so a replica that died is noticed within
seconds (`take_expired_leases`). A recovery sweep fails claims whose job never started and jobs that
overran. A failure a retry would only repeat (the row's inputs are gone or its settings are invalid) is
recorded as such in its progress (`RETRYABLE`), and such a row is not queued again. The
columns come from `JobColumns`, mixed into each service's own declarative class; each service keeps
its own table and migration.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy import JSON, String, Text, select, update
from sqlalchemy.orm import Mapped, Session, mapped_column

from stash_common.db import UtcDateTime, new_id, utc_now
from stash_common.errors import Code, FailedPrecondition, NotFound, StashError

QUEUED, RUNNING, SUCCEEDED, FAILED = "queued", "running", "succeeded", "failed"
RETRYABLE = "retryable"  # the key of a failed row's progress that says whether a retry may succeed
# Codes whose cause a retry of the same row repeats: what it names is gone, or its own settings are invalid.
# Anything else (an outage, a crash, too few ratings, which the owner can still add) may succeed later.
_REPEATED_ON_RETRY = frozenset({Code.NOT_FOUND, Code.INVALID_ARGUMENT})


class JobColumns:
    """The lifecycle columns of a job-backed row."""

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    owner_id: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(20), default=QUEUED)
    job_id: Mapped[str | None] = mapped_column(String(36))
    progress: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utc_now)
    claimed_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    started_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    lease_until: Mapped[datetime | None] = mapped_column(UtcDateTime())


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


def claim(session: Session, kind: type[Row], row_id: str, lease: timedelta | None = None) -> str | None:
    """Move a queued row to running under a new job id, leased for `lease` when given; None when another won."""
    job_id = new_id()
    now = utc_now()
    claimed = session.execute(
        update(kind)
        .where(kind.id == row_id, kind.status == QUEUED)
        .values(
            status=RUNNING,
            job_id=job_id,
            claimed_at=now,
            progress={"stage": "preparing"},
            lease_until=now + lease if lease is not None else None,
        )
    )
    return job_id if claimed.rowcount == 1 else None  # type: ignore[attr-defined]


def retry_repeats(error: StashError) -> bool:
    """Whether retrying the row that failed with `error` would fail the same way."""
    return error.code in _REPEATED_ON_RETRY


def retryable(row: JobColumns) -> bool:
    """Whether a retry of the row may succeed: it failed, and not for a reason a retry repeats."""
    return row.status == FAILED and (row.progress or {}).get(RETRYABLE, True) is not False


def requeue(session: Session, kind: type[Row], owner_id: str, row_id: str, noun: str) -> Row:
    """Queue a failed row again under its id, its lifecycle fields reset (the caller resets its results)."""
    row = find(session, kind, owner_id, row_id, noun)
    if row.status != FAILED:
        raise FailedPrecondition(f"{noun} {row_id} is {row.status}; only a failed {noun} can be retried")
    if not retryable(row):
        raise FailedPrecondition(f"{noun} {row_id} failed for a reason a retry would repeat: {row.error}")
    row.status, row.error, row.job_id, row.progress = QUEUED, None, None, {}
    row.claimed_at = row.started_at = row.finished_at = row.lease_until = None
    return row


def running_job(session: Session, kind: type[Row], row_id: str, job_id: str, noun: str) -> Row:
    """The running row of this launch, locked; a report from a superseded or finished launch is refused."""
    row = session.get(kind, row_id, with_for_update=True)
    if row is None:
        raise NotFound(f"{noun} {row_id} not found")
    if row.status != RUNNING or row.job_id != job_id:
        raise FailedPrecondition(f"job {job_id} of {noun} {row_id} is no longer running")
    return row


def completing_job(session: Session, kind: type[Row], row_id: str, job_id: str, noun: str) -> Row | None:
    """The running row a launch's completion report settles, locked; None when that launch's row is settled already.

    A worker may repeat its report (the first answer was lost): the repeat changes nothing. A report from a
    superseded launch is refused (FailedPrecondition).
    """
    row = session.get(kind, row_id, with_for_update=True)
    if row is not None and row.job_id == job_id and row.status in (SUCCEEDED, FAILED):
        return None
    return running_job(session, kind, row_id, job_id, noun)


def finish(row: JobColumns, status: str, error: str | None = None) -> None:
    """Settle a running row."""
    row.status, row.error, row.finished_at = status, error, utc_now()


def settled(row: Row, noun: str) -> Row:
    """The row, unless it is queued or running: its job may still report to it (FailedPrecondition)."""
    if row.status in (QUEUED, RUNNING):
        raise FailedPrecondition(f"{noun} {row.id} is {row.status}; it can be deleted once it succeeded or failed")
    return row


def delete(session: Session, kind: type[Row], owner_id: str, row_id: str, noun: str) -> None:
    """Delete the owner's row unless it is queued or running (a running job is never cancelled by a delete)."""
    session.delete(settled(find(session, kind, owner_id, row_id, noun), noun))


@dataclass(frozen=True)
class ExpiredLease:
    """A running row whose replica stopped renewing its lease: it died, or lost its database for a while."""

    row_id: str
    job_id: str
    job_name: str | None  # the worker's name, once it was launched
    started: bool


def renew_leases(session: Session, kind: type[Row], row_ids: Collection[str], lease: timedelta) -> None:
    """Extend the leases of the running rows this replica holds: it prepares or watches their jobs."""
    if row_ids:
        session.execute(
            update(kind).where(kind.id.in_(list(row_ids)), kind.status == RUNNING).values(lease_until=utc_now() + lease)
        )


def take_expired_leases(
    session: Session, kind: type[Row], held: Collection[str], lease: timedelta, job_name_key: str
) -> list[ExpiredLease]:
    """Take over the running rows whose lease ran out (not `held` here), leased again so no other replica does."""
    now = utc_now()
    query = select(kind).where(kind.status == RUNNING, kind.lease_until < now)
    if held:
        query = query.where(kind.id.not_in(list(held)))
    expired = []
    for row in session.scalars(query.with_for_update(skip_locked=True)):
        row.lease_until = now + lease
        name = (row.progress or {}).get(job_name_key)
        expired.append(ExpiredLease(row.id, row.job_id or "", name, row.started_at is not None))
    return expired


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
