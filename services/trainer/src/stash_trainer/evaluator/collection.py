"""Collecting the corpus: read only what consents cover, build the candidates, keep the new ones.

The reader is asked for one consented scope at a time, so an account without an open consent is never
read at all; `build_candidates` checks every trace against the scopes again.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session

from stash_common.db import new_id, utc_now
from stash_trainer.evaluator.consent import Scope, consented_scopes
from stash_trainer.evaluator.corpus import Candidate, ConsentedTrace, Side, build_candidates
from stash_trainer.evaluator.review import record_action
from stash_trainer.evaluator.store import ComparisonRow


class ConsentedReader(Protocol):
    """Reads an account's traces within one consent scope (the trainer's `TraceClient`)."""

    def consented_traces(self, scope: Scope) -> list[ConsentedTrace]:
        """The traces of `scope.owner_id` from the sources the scope covers."""
        ...


def collect(session: Session, reader: ConsentedReader, actor_id: str) -> int:
    """Add the candidate comparisons of every consented account; answers how many were new."""
    scopes = consented_scopes(session)
    traces = [item for scope in scopes.values() for item in reader.consented_traces(scope)]
    added = save_candidates(session, build_candidates(traces, scopes))
    record_action(session, actor_id, "collect_corpus", {"accounts": len(scopes), "added": added})
    return added


def save_candidates(session: Session, candidates: Sequence[Candidate]) -> int:
    """Store the candidates not stored before (by key); answers how many were new."""
    keys = [candidate.key for candidate in candidates]
    known = set(session.scalars(select(ComparisonRow.key).where(ComparisonRow.key.in_(keys)))) if keys else set()
    now = utc_now()
    fresh = {candidate.key: candidate for candidate in candidates if candidate.key not in known}
    session.add_all(_row(candidate, now) for candidate in fresh.values())
    return len(fresh)


def _row(candidate: Candidate, now: datetime) -> ComparisonRow:
    return ComparisonRow(
        id=new_id(),
        key=candidate.key,
        owner_id=candidate.owner_id,
        source_id=candidate.source_id,
        source_format=candidate.source_format,
        preference_source=candidate.preference_source,
        action_type=candidate.action_type,
        author_ids=list(candidate.author_ids),
        trace_ids=list(candidate.trace_ids),
        task_groups=list(candidate.task_groups),
        chosen=_side(candidate.chosen),
        rejected=_side(candidate.rejected),
        evidence=dict(candidate.evidence),
        created_at=now,
    )


def _side(side: Side) -> dict[str, str]:
    return {
        "trace_id": side.trace_id,
        "step_id": side.step_id,
        "source_id": side.source_id,
        "context": side.context,
        "action": side.action,
    }
