"""Trace revisions for the labeler: announcing new ones, and listing changes for its sweep.

Ingest announces and the labeler pulls. After an import commits, every trace that changed is
announced to the labeler on a background thread, so imports never wait for it and a labeler outage
never fails them: an announcement is only a hint. The labeler's sweep reads `list_revisions` from a
saved cursor to pick up anything an announcement missed. Changes younger than the settle window are
left for the next sweep: a long transaction may commit a timestamp older than rows another
transaction committed first, and the cursor must not pass it. How an announcement travels is
injected (`clients.LabelerClient` in the service), so this policy knows no transport.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import structlog
from sqlalchemy import and_, or_, select
from sqlalchemy.orm import Session

from stash_common.db import utc_now
from stash_common.errors import InvalidArgument, StashError
from stash_ingest.store import TraceRow

log = structlog.get_logger()
ANNOUNCE_BATCH = 500  # revisions of one owner announced in one call


@dataclass(frozen=True)
class Revision:
    """A trace at its current revision."""

    owner_id: str
    trace_id: str
    revision: int
    updated_at: datetime


def current_revisions(session: Session, trace_ids: Sequence[str]) -> list[Revision]:
    """The current revision of each listed trace that still exists."""
    rows = session.execute(
        select(TraceRow.owner_id, TraceRow.id, TraceRow.revision, TraceRow.updated_at).where(TraceRow.id.in_(trace_ids))
    )
    return [Revision(*row) for row in rows]


def list_revisions(
    session: Session, cursor: str, limit: int, settle: timedelta, owner_id: str | None = None
) -> tuple[list[Revision], str]:
    """Traces changed after `cursor` and before the settle window, oldest change first, and the next cursor."""
    query = select(TraceRow.owner_id, TraceRow.id, TraceRow.revision, TraceRow.updated_at).where(
        TraceRow.updated_at < utc_now() - settle
    )
    if cursor:
        after, after_id = _decode(cursor)
        query = query.where(
            or_(TraceRow.updated_at > after, and_(TraceRow.updated_at == after, TraceRow.id > after_id))
        )
    if owner_id is not None:
        query = query.where(TraceRow.owner_id == owner_id)
    rows = [Revision(*row) for row in session.execute(query.order_by(TraceRow.updated_at, TraceRow.id).limit(limit))]
    return rows, _encode(rows[-1]) if rows else cursor


def _encode(revision: Revision) -> str:
    return f"{revision.updated_at.isoformat()}|{revision.trace_id}"


def _decode(cursor: str) -> tuple[datetime, str]:
    try:
        stamp, trace_id = cursor.split("|", 1)
        return datetime.fromisoformat(stamp), trace_id
    except ValueError:
        raise InvalidArgument("cursor", "is not a cursor this service returned") from None


class Announcer:
    """Announces revisions in the background through `send`, best effort: a failed send is logged and dropped.

    Owners take turns: each owner's revisions wait in their own line, and each turn sends up to
    `ANNOUNCE_BATCH` of one owner's oldest in one call, so the announcements of one owner's import of
    90 000 traces do not hold back the next owner's first one.
    """

    def __init__(self, send: Callable[[Sequence[Revision]], None]) -> None:
        self._send = send
        self._pending: dict[str, deque[Revision]] = {}  # by owner; the owner next in turn first
        self._ready = threading.Condition()
        threading.Thread(target=self._run, name="revision-announcer", daemon=True).start()

    def announce(self, revisions: Sequence[Revision]) -> None:
        """Queue announcements; returns at once."""
        with self._ready:
            for revision in revisions:
                self._pending.setdefault(revision.owner_id, deque()).append(revision)
            self._ready.notify()

    def _next(self) -> list[Revision]:
        """The next owner's oldest pending revisions (one call's worth); that owner goes to the back of the line."""
        with self._ready:
            self._ready.wait_for(lambda: bool(self._pending))
            owner_id, line = next(iter(self._pending.items()))
            turn = [line.popleft() for _ in range(min(ANNOUNCE_BATCH, len(line)))]
            del self._pending[owner_id]
            if line:
                self._pending[owner_id] = line
            return turn

    def _run(self) -> None:
        while True:
            revisions = self._next()
            try:
                self._send(revisions)
            except StashError as error:
                # The labeler's sweep finds the revisions later; an outage must never fail an import.
                log.warning("announcement failed", revisions=len(revisions), reason=error.message)
