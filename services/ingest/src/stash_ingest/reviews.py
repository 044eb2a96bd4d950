"""Reviewers: an owner shares all their traces, or those of chosen sources, with another user, who may read
and annotate them and nothing more.

This module is the one place that decides who may read a trace: its owner, or a reviewer whose grant covers
the trace's source. Every other service asks ingest (`AuthorizeTrace`) or is handed the owner's id by the
gateway after it asked. A revoked grant is a deleted row, so the reviewer's next request finds nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, exists, or_, select
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from stash_common.db import utc_now
from stash_common.errors import InvalidArgument, NotFound, PermissionDenied
from stash_ingest.store import ReviewGrantRow, ReviewGrantSourceRow, TraceRow

SOURCE_ID_MAX = 200
GRANT_SOURCES_MAX = 200


@dataclass(frozen=True)
class Grant:
    """What one owner shares with one reviewer: every trace, or the traces of `source_ids`."""

    owner_id: str
    reviewer_id: str
    all_sources: bool
    source_ids: tuple[str, ...]
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class TraceAccess:
    """How the caller reaches a trace: as its owner, or as a reviewer of `owner_id`'s traces."""

    owner_id: str
    reviewer: bool


def save_grant(
    session: Session, owner_id: str, reviewer_id: str, all_sources: bool, source_ids: Sequence[str]
) -> tuple[Grant, bool]:
    """Give or replace the reviewer's grant; returns it and whether it is new."""
    sources = _checked_sources(owner_id, reviewer_id, all_sources, source_ids)
    row = session.get(ReviewGrantRow, (owner_id, reviewer_id))
    created = row is None
    now = utc_now()
    if row is None:
        row = ReviewGrantRow(owner_id=owner_id, reviewer_id=reviewer_id, created_at=now)
        session.add(row)
    row.all_sources, row.updated_at = all_sources, now
    session.flush()
    session.execute(
        delete(ReviewGrantSourceRow).where(
            ReviewGrantSourceRow.owner_id == owner_id, ReviewGrantSourceRow.reviewer_id == reviewer_id
        )
    )
    session.add_all(ReviewGrantSourceRow(owner_id=owner_id, reviewer_id=reviewer_id, source_id=s) for s in sources)
    session.flush()
    return _grant(row, sources), created


def _checked_sources(owner_id: str, reviewer_id: str, all_sources: bool, source_ids: Sequence[str]) -> list[str]:
    if not reviewer_id:
        raise InvalidArgument("reviewer_id", "name the user who reviews")
    if reviewer_id == owner_id:
        raise InvalidArgument("reviewer_id", "you already see your own traces: name another user")
    if all_sources and source_ids:
        raise InvalidArgument("source_ids", "share either every source or chosen ones, not both")
    if not all_sources and not source_ids:
        raise InvalidArgument("source_ids", "name at least one source id, or share every source")
    if len(source_ids) > GRANT_SOURCES_MAX:
        raise InvalidArgument("source_ids", f"at most {GRANT_SOURCES_MAX} sources per grant")
    for source_id in source_ids:
        if not 1 <= len(source_id) <= SOURCE_ID_MAX:
            raise InvalidArgument("source_ids", f"each source id must be 1 to {SOURCE_ID_MAX} characters")
    return sorted(set(source_ids))


def list_grants(session: Session, *, owner_id: str | None = None, reviewer_id: str | None = None) -> list[Grant]:
    """The grants an owner gave, or those a reviewer received, oldest first."""
    query = select(ReviewGrantRow).order_by(ReviewGrantRow.created_at, ReviewGrantRow.reviewer_id)
    if owner_id is not None:
        query = query.where(ReviewGrantRow.owner_id == owner_id)
    if reviewer_id is not None:
        query = query.where(ReviewGrantRow.reviewer_id == reviewer_id)
    rows = list(session.scalars(query))
    sources: dict[tuple[str, str], list[str]] = {}
    if rows:
        keys = select(ReviewGrantSourceRow).where(
            ReviewGrantSourceRow.owner_id.in_({row.owner_id for row in rows}),
            ReviewGrantSourceRow.reviewer_id.in_({row.reviewer_id for row in rows}),
        )
        for source in session.scalars(keys.order_by(ReviewGrantSourceRow.source_id)):
            sources.setdefault((source.owner_id, source.reviewer_id), []).append(source.source_id)
    return [_grant(row, sources.get((row.owner_id, row.reviewer_id), [])) for row in rows]


def revoke_grant(session: Session, owner_id: str, reviewer_id: str) -> None:
    """Delete the reviewer's grant; NOT_FOUND when the owner gave them none."""
    row = session.get(ReviewGrantRow, (owner_id, reviewer_id))
    if row is None:
        raise NotFound(f"no review grant to user {reviewer_id}")
    session.delete(row)
    session.flush()


def shared_with(reviewer_id: str) -> ColumnElement[bool]:
    """The condition on TraceRow that a grant to `reviewer_id` covers the trace: one of every source, or one
    listing the trace's source (a grant's source rows go with it)."""
    every_source = exists().where(
        ReviewGrantRow.owner_id == TraceRow.owner_id,
        ReviewGrantRow.reviewer_id == reviewer_id,
        ReviewGrantRow.all_sources.is_(True),
    )
    chosen_source = exists().where(
        ReviewGrantSourceRow.owner_id == TraceRow.owner_id,
        ReviewGrantSourceRow.reviewer_id == reviewer_id,
        ReviewGrantSourceRow.source_id == TraceRow.source_id,
    )
    return or_(every_source, chosen_source)


def readable_trace(session: Session, caller_id: str, trace_id: str) -> tuple[TraceRow, TraceAccess]:
    """The trace and how the caller reaches it; NOT_FOUND unless they own it or a grant covers it."""
    row = session.get(TraceRow, trace_id)
    if row is not None and row.owner_id == caller_id:
        return row, TraceAccess(owner_id=caller_id, reviewer=False)
    if row is not None and _is_shared(session, row, caller_id):
        return row, TraceAccess(owner_id=row.owner_id, reviewer=True)
    raise NotFound(f"trace {trace_id} not found")


def can_read(session: Session, caller_id: str, trace_id: str) -> bool:
    """Whether the caller owns the trace or a grant covers it."""
    try:
        readable_trace(session, caller_id, trace_id)
    except NotFound:
        return False
    return True


def own_trace(session: Session, caller_id: str, trace_id: str, doing: str) -> TraceRow:
    """The caller's own trace, for an owner-only action: 403 with the reason when they only review it, and
    NOT_FOUND when they may not even read it."""
    row, access = readable_trace(session, caller_id, trace_id)
    if access.reviewer:
        raise PermissionDenied(f"trace {trace_id} is shared with you for review: only its owner can {doing}")
    return row


def _is_shared(session: Session, row: TraceRow, reviewer_id: str) -> bool:
    query = select(TraceRow.id).where(TraceRow.id == row.id, shared_with(reviewer_id))
    return session.scalar(query) is not None


def _grant(row: ReviewGrantRow, source_ids: Sequence[str]) -> Grant:
    return Grant(
        owner_id=row.owner_id,
        reviewer_id=row.reviewer_id,
        all_sources=row.all_sources,
        source_ids=tuple(source_ids),
        created_at=row.created_at,
        updated_at=row.updated_at,
    )
