"""Consent: whether an account's data may improve the shared evaluator.

Rules:

- Off by default: an account without an open consent contributes nothing.
- A consent covers all the account's traces (`source_ids` None) or only the chosen sources, each of
  which the account must own. It records who gave it, when, and the version of the consent text shown.
- Giving a new consent closes the open one; revoking closes it. Closed consents are kept, so the account
  can see what it agreed to and when it stopped.
- What a job may read is decided here, where the data is selected: `covers` is the one test.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from stash_common.db import new_id, utc_now
from stash_common.errors import InvalidArgument, NotFound
from stash_trainer.evaluator.store import ConsentRow

MAX_SOURCES = 1000


@dataclass(frozen=True)
class Scope:
    """What one account lets the evaluator read: all its sources (`source_ids` None) or only these."""

    owner_id: str
    source_ids: frozenset[str] | None

    def covers(self, owner_id: str, source_id: str) -> bool:
        """Whether data of `owner_id` from `source_id` is consented."""
        return owner_id == self.owner_id and (self.source_ids is None or source_id in self.source_ids)


def grant(
    session: Session,
    owner_id: str,
    actor_id: str,
    text_version: str,
    source_ids: Sequence[str] | None,
    owned_sources: Collection[str],
) -> ConsentRow:
    """Open a consent for the owner (closing the open one); every chosen source must be the owner's."""
    if not text_version.strip():
        raise InvalidArgument("text_version", "name the version of the consent text the account was shown")
    if source_ids is not None:
        _check_sources(source_ids, owned_sources)
    now = utc_now()
    _close_open(session, owner_id, actor_id, now)
    row = ConsentRow(
        id=new_id(),
        owner_id=owner_id,
        source_ids=sorted(set(source_ids)) if source_ids is not None else None,
        text_version=text_version.strip(),
        granted_by=actor_id,
        granted_at=now,
    )
    session.add(row)
    return row


def revoke(session: Session, owner_id: str, actor_id: str) -> ConsentRow:
    """Close the owner's open consent; without one there is nothing to revoke."""
    row = open_consent(session, owner_id)
    if row is None:
        raise NotFound("no open consent to revoke: the account does not share data with the shared evaluator")
    _close_open(session, owner_id, actor_id, utc_now())
    return row


def open_consent(session: Session, owner_id: str) -> ConsentRow | None:
    """The owner's open consent, if any."""
    query = select(ConsentRow).where(ConsentRow.owner_id == owner_id, ConsentRow.revoked_at.is_(None))
    return session.scalars(query).first()


def history(session: Session, owner_id: str) -> list[ConsentRow]:
    """Every consent the owner gave, newest first."""
    query = select(ConsentRow).where(ConsentRow.owner_id == owner_id).order_by(ConsentRow.granted_at.desc())
    return list(session.scalars(query))


def consented_scopes(session: Session) -> dict[str, Scope]:
    """The scope of every account with an open consent, by owner id: the only data a job may read."""
    rows = session.scalars(select(ConsentRow).where(ConsentRow.revoked_at.is_(None)))
    return {row.owner_id: scope_of(row) for row in rows}


def scope_of(row: ConsentRow) -> Scope:
    """The scope an open consent grants."""
    return Scope(row.owner_id, frozenset(row.source_ids) if row.source_ids is not None else None)


def stopped_at(session: Session, owner_id: str) -> datetime | None:
    """When the owner last stopped contributing: the latest revocation while no consent is open."""
    if open_consent(session, owner_id) is not None:
        return None
    closed = [row.revoked_at for row in history(session, owner_id) if row.revoked_at is not None]
    return max(closed, default=None)


def _check_sources(source_ids: Sequence[str], owned_sources: Collection[str]) -> None:
    if not source_ids:
        raise InvalidArgument("source_ids", "choose at least one source, or consent for all traces")
    if len(source_ids) > MAX_SOURCES:
        raise InvalidArgument("source_ids", f"at most {MAX_SOURCES} sources")
    for source_id in source_ids:
        if source_id not in owned_sources:
            reason = f"source {source_id} is not yours: only a source's owner can consent for it"
            raise InvalidArgument("source_ids", reason)


def _close_open(session: Session, owner_id: str, actor_id: str, now: datetime) -> None:
    query = select(ConsentRow).where(ConsentRow.owner_id == owner_id, ConsentRow.revoked_at.is_(None))
    for row in session.scalars(query):
        row.revoked_at = now
        row.revoked_by = actor_id
