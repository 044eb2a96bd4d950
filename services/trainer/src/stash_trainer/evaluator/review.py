"""Independent review: a comparison is trained on only once people other than its authors agree on it.

Rules:

- Only evaluator reviewers (named by the operator) review. A reviewer never sees, and may not review, a
  comparison they authored or whose traces are theirs; each reviewer reviews a comparison once.
- The queue shows the context and the two actions as A and B in an order drawn per (comparison,
  reviewer), never the origin. A verdict on A (`better`, `worse`, `tie`, `invalid`) is stored relative
  to the candidate: `confirms` (chosen is better), `reverses`, `tie` or `invalid`.
- A comparison is admitted when `agreeing_reviews` reviews confirm it (or reverse it: it is admitted the
  other way round) and none says otherwise; as many `tie` or `invalid` reviews rule it out. Any two different
  verdicts make it disputed: every review is kept and the disagreement reported.
- Only comparisons whose owner's consent still covers both sides are queued, admitted or counted.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from stash_common.db import new_id, utc_now
from stash_common.errors import AlreadyExists, InvalidArgument, NotFound, PermissionDenied
from stash_trainer.evaluator.consent import Scope, consented_scopes
from stash_trainer.evaluator.store import ComparisonRow, OperatorActionRow, PolicyRow, ReviewerRow, ReviewRow

Verdict = Literal["better", "worse", "tie", "invalid"]
VERDICTS: tuple[Verdict, ...] = ("better", "worse", "tie", "invalid")
DEFAULT_AGREEING_REVIEWS = 2
MAX_AGREEING_REVIEWS = 10
MAX_NOTE_CHARS = 2000
Status = Literal["pending", "admitted", "tied", "invalid", "disputed"]


@dataclass(frozen=True)
class QueueItem:
    """A comparison as a reviewer sees it: the two actions in this reviewer's order, no origin."""

    comparison_id: str
    context_a: str
    action_a: str
    context_b: str
    action_b: str


@dataclass(frozen=True)
class Outcome:
    """Where a comparison's review stands, and its direction once admitted (True: the candidate's)."""

    status: Status
    reviews: int
    confirmed: bool | None = None


def record_action(session: Session, actor_id: str, action: str, details: Mapping[str, Any]) -> None:
    """Record something an operator did, with who and when, in the same transaction as the change."""
    session.add(OperatorActionRow(id=new_id(), actor_id=actor_id, action=action, details=dict(details), at=utc_now()))


def name_reviewer(session: Session, actor_id: str, user_id: str) -> ReviewerRow:
    """Make `user_id` an evaluator reviewer (naming one twice is a no-op that still answers the row)."""
    if not user_id.strip():
        raise InvalidArgument("user_id", "must not be empty")
    row = session.get(ReviewerRow, user_id)
    if row is None:
        row = ReviewerRow(user_id=user_id, named_by=actor_id, named_at=utc_now())
        session.add(row)
        record_action(session, actor_id, "name_reviewer", {"user_id": user_id})
    return row


def remove_reviewer(session: Session, actor_id: str, user_id: str) -> None:
    """Stop `user_id` reviewing; their past reviews stay."""
    row = session.get(ReviewerRow, user_id)
    if row is None:
        raise NotFound(f"{user_id} is not an evaluator reviewer")
    session.delete(row)
    record_action(session, actor_id, "remove_reviewer", {"user_id": user_id})


def reviewers(session: Session) -> list[ReviewerRow]:
    """The evaluator reviewers, in the order they were named."""
    return list(session.scalars(select(ReviewerRow).order_by(ReviewerRow.named_at)))


def agreeing_reviews(session: Session) -> int:
    """How many agreeing reviews admit a comparison."""
    row = session.get(PolicyRow, 1)
    return row.agreeing_reviews if row is not None else DEFAULT_AGREEING_REVIEWS


def set_agreeing_reviews(session: Session, actor_id: str, count: int) -> None:
    """Set how many agreeing reviews admit a comparison."""
    if not 1 <= count <= MAX_AGREEING_REVIEWS:
        raise InvalidArgument("agreeing_reviews", f"must be 1..{MAX_AGREEING_REVIEWS}")
    row = session.get(PolicyRow, 1)
    if row is None:
        session.add(PolicyRow(id=1, agreeing_reviews=count))
    else:
        row.agreeing_reviews = count
    record_action(session, actor_id, "set_agreeing_reviews", {"agreeing_reviews": count})


def queue(session: Session, reviewer_id: str, limit: int) -> list[QueueItem]:
    """The next comparisons for this reviewer: undecided, consented, not their own, not reviewed by them."""
    _check_reviewer(session, reviewer_id)
    needed = agreeing_reviews(session)
    reviewed = set(session.scalars(select(ReviewRow.comparison_id).where(ReviewRow.reviewer_id == reviewer_id)))
    items = []
    for row, reviews in _consented_with_reviews(session):
        if row.id in reviewed or _is_own(row, reviewer_id):
            continue
        if outcome(reviews, needed).status != "pending":
            continue
        items.append(_shown(row, reviewer_id))
        if len(items) == limit:
            break
    return items


def record_review(session: Session, reviewer_id: str, comparison_id: str, verdict: str, note: str | None) -> ReviewRow:
    """Record the reviewer's verdict on A (as this reviewer was shown it); the rules above are checked first."""
    _check_reviewer(session, reviewer_id)
    if verdict not in VERDICTS:
        raise InvalidArgument("verdict", f"must be one of {', '.join(VERDICTS)}")
    if note is not None and len(note) > MAX_NOTE_CHARS:
        raise InvalidArgument("note", f"at most {MAX_NOTE_CHARS} characters")
    row = session.get(ComparisonRow, comparison_id)
    if row is None or not consented(row, consented_scopes(session)):
        raise NotFound(f"comparison {comparison_id} not found")
    if _is_own(row, reviewer_id):
        raise PermissionDenied("independent review: nobody reviews a comparison they authored or on their traces")
    review = ReviewRow(
        id=new_id(),
        comparison_id=comparison_id,
        reviewer_id=reviewer_id,
        verdict=_relative(verdict, a_is_chosen(comparison_id, reviewer_id)),
        note=note or None,
        created_at=utc_now(),
    )
    session.add(review)
    try:
        session.flush()
    except IntegrityError:
        raise AlreadyExists(f"comparison {comparison_id}: each reviewer reviews a comparison once") from None
    return review


def outcome(reviews: Sequence[ReviewRow], needed: int) -> Outcome:
    """The status the reviews give a comparison under the policy."""
    counts = Counter(review.verdict for review in reviews)
    if len(counts) > 1:
        return Outcome("disputed", len(reviews))
    if not counts:
        return Outcome("pending", 0)
    ((verdict, count),) = counts.items()
    if count < needed:
        return Outcome("pending", count)
    if verdict in ("tie", "invalid"):
        return Outcome("tied" if verdict == "tie" else "invalid", count)
    return Outcome("admitted", count, confirmed=verdict == "confirms")


def admitted(session: Session) -> list[tuple[ComparisonRow, bool]]:
    """Every admitted, still consented comparison with its direction (True: as the candidate was built)."""
    needed = agreeing_reviews(session)
    result = []
    for row, reviews in _consented_with_reviews(session):
        decided = outcome(reviews, needed)
        if decided.status == "admitted" and decided.confirmed is not None:
            result.append((row, decided.confirmed))
    return result


def disagreements(session: Session) -> list[dict[str, Any]]:
    """Every disputed comparison with all its reviews."""
    needed = agreeing_reviews(session)
    return [
        {"comparison_id": row.id, "reviews": [_review_view(review) for review in reviews]}
        for row, reviews in _consented_with_reviews(session)
        if outcome(reviews, needed).status == "disputed"
    ]


def stats(session: Session) -> dict[str, Any]:
    """Counts of the consented corpus by status, preference source and action type, and the reviewers."""
    needed = agreeing_reviews(session)
    statuses: Counter[str] = Counter()
    sources: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    groups: Counter[str] = Counter()
    reviews = 0
    for row, row_reviews in _consented_with_reviews(session):
        status = outcome(row_reviews, needed).status
        statuses[status] += 1
        sources[row.preference_source] += 1
        kinds[row.action_type] += 1
        reviews += len(row_reviews)
        if status == "admitted":
            groups.update(row.task_groups)
    return {
        "comparisons": sum(statuses.values()),
        "by_status": {status: statuses[status] for status in ("pending", "admitted", "tied", "invalid", "disputed")},
        "by_preference_source": dict(sorted(sources.items())),
        "by_action_type": dict(sorted(kinds.items())),
        "reviews": reviews,
        "reviewers": len(reviewers(session)),
        "agreeing_reviews": needed,
        "admitted_task_groups": dict(sorted(groups.items())),
    }


def a_is_chosen(comparison_id: str, reviewer_id: str) -> bool:
    """Whether this reviewer is shown the candidate's chosen action as A: a fair coin per (comparison, reviewer)."""
    return hashlib.sha256(f"{comparison_id}\x1f{reviewer_id}".encode()).digest()[0] % 2 == 0


def consented(row: ComparisonRow, scopes: Mapping[str, Scope]) -> bool:
    """Whether the owner's open consent covers both sides of the comparison."""
    scope = scopes.get(row.owner_id)
    sides = (row.chosen["source_id"], row.rejected["source_id"])
    return scope is not None and all(scope.covers(row.owner_id, source_id) for source_id in sides)


def _consented_with_reviews(session: Session) -> Iterable[tuple[ComparisonRow, list[ReviewRow]]]:
    scopes = consented_scopes(session)
    query = (
        select(ComparisonRow)
        .where(ComparisonRow.owner_id.in_(list(scopes)))
        .order_by(ComparisonRow.created_at, ComparisonRow.id)
    )
    rows = [row for row in session.scalars(query) if consented(row, scopes)]
    by_comparison: dict[str, list[ReviewRow]] = {row.id: [] for row in rows}
    for review in session.scalars(select(ReviewRow).order_by(ReviewRow.created_at)):
        if review.comparison_id in by_comparison:
            by_comparison[review.comparison_id].append(review)
    return [(row, by_comparison[row.id]) for row in rows]


def _check_reviewer(session: Session, reviewer_id: str) -> None:
    if session.get(ReviewerRow, reviewer_id) is None:
        raise PermissionDenied("only evaluator reviewers named by the operator review comparisons")


def _is_own(row: ComparisonRow, user_id: str) -> bool:
    return user_id == row.owner_id or user_id in row.author_ids


def _shown(row: ComparisonRow, reviewer_id: str) -> QueueItem:
    first, second = (row.chosen, row.rejected) if a_is_chosen(row.id, reviewer_id) else (row.rejected, row.chosen)
    return QueueItem(row.id, first["context"], first["action"], second["context"], second["action"])


def _relative(verdict: str, a_chosen: bool) -> str:
    if verdict in ("tie", "invalid"):
        return verdict
    return "confirms" if (verdict == "better") == a_chosen else "reverses"


def _review_view(review: ReviewRow) -> dict[str, Any]:
    at = review.created_at.isoformat()
    return {"reviewer_id": review.reviewer_id, "verdict": review.verdict, "note": review.note, "at": at}
