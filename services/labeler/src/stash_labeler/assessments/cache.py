"""The assessment cache: one row per evidence key, and a lease so that one caller generates at a time.

`claim` answers what the caller should do: use a ready body, report a running generation
(pending) or a recent failure, or generate itself because it now holds the lease. A lease that
ran out (the generating process was interrupted) is taken over by the next caller; a failure is
reported until its lease runs out, and then generated again. `finish` writes the result only while
the caller's lease token is still the row's, so a late writer never overwrites its successor.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import CursorResult, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from stash_common.db import new_id, utc_now
from stash_labeler.store import SectionSummaryRow, TraceCompletionRow

PENDING, READY, FAILED, GENERATE = "pending", "ready", "failed", "generate"
AssessmentRow = type[SectionSummaryRow] | type[TraceCompletionRow]


@dataclass(frozen=True)
class Claim:
    """What a caller found: `state` is ready, pending, failed, or generate (it holds the lease `token`)."""

    row_id: str
    state: str
    body: dict[str, Any] | None = None
    error: str | None = None
    token: str | None = None


def claim(session: Session, table: AssessmentRow, key: Mapping[str, Any], lease_s: float) -> Claim:
    """The cached assessment under `key`, or the lease to generate it."""
    now, token = utc_now(), new_id()
    lease_until = now + timedelta(seconds=lease_s)
    row = _find(session, table, key)
    if row is None:
        fresh = table(**key, status=PENDING, lease_token=token, lease_until=lease_until, updated_at=now)
        try:
            with session.begin_nested():  # a concurrent insert of the same key loses here, not later
                session.add(fresh)
            return Claim(fresh.id, GENERATE, token=token)
        except IntegrityError:
            row = _find(session, table, key)
            assert row is not None  # the conflicting row is committed
    if row.status == READY:
        return Claim(row.id, READY, body=row.body)
    if row.lease_until is not None and _aware(row.lease_until) > now:
        return Claim(row.id, row.status, error=row.error)
    taken = (
        update(table)
        .where(table.id == row.id, table.lease_token == row.lease_token)
        .values(status=PENDING, lease_token=token, lease_until=lease_until, updated_at=now)
    )
    if _changed(session, taken):
        return Claim(row.id, GENERATE, token=token)
    return Claim(row.id, PENDING)  # another caller took the expired lease first


def finish(
    session: Session,
    table: AssessmentRow,
    claimed: Claim,
    body: dict[str, Any] | None = None,
    error: str | None = None,
    retry_after_s: float = 0,
) -> bool:
    """Save the generated body (or the failure, reported until `retry_after_s` passes); False if the lease was lost."""
    now = utc_now()
    values: dict[str, Any] = {"status": READY if error is None else FAILED, "body": body, "error": error}
    values |= {"updated_at": now, "lease_until": now + timedelta(seconds=retry_after_s)}
    statement = (
        update(table)
        .where(table.id == claimed.row_id, table.lease_token == claimed.token, table.status == PENDING)
        .values(**values)
    )
    return bool(_changed(session, statement))


def _find(session: Session, table: AssessmentRow, key: Mapping[str, Any]) -> Any:
    conditions = [getattr(table, column) == value for column, value in key.items() if column != "owner_id"]
    return session.scalars(select(table).where(*conditions)).one_or_none()


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)  # SQLite returns naive UTC


def _changed(session: Session, statement: Any) -> int:
    result = session.execute(statement)
    assert isinstance(result, CursorResult)
    return result.rowcount
