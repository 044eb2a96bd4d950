"""Annotations: ratings and comments on a trace or on one of its steps, with their rules.

- rating is +1, −1 or null; an annotation carries a rating, a comment, or both;
- a quote ({text, prefix, suffix}) needs a step, and its text must occur in that step's content;
- system steps are context, not agent actions: they take comments but not ratings;
- a flagged annotation (`label_error`) stays visible but never trains;
- the author alone changes what an annotation says; its trace's owner may also delete it, and anyone who reads
  the trace (a reviewer too) may flag it as a label error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from stash_common.db import utc_now
from stash_common.errors import InvalidArgument, NotFound, PermissionDenied
from stash_ingest.reviews import can_read
from stash_ingest.store import AnnotationRow, StepRow, TraceRow, find_step
from stash_ingest.traces import Step

COMMENT_MAX = 20_000
FLAG_FIELDS = frozenset({"label_error", "label_error_note"})  # what a reader who is not the author may change


@dataclass(frozen=True)
class Author:
    """Who writes an annotation: the authenticated user."""

    id: str
    name: str


@dataclass(frozen=True)
class Quote:
    """The highlighted span of a step's content, anchored by the text around it."""

    text: str
    prefix: str = ""
    suffix: str = ""


@dataclass(frozen=True)
class Annotation:
    """A stored annotation; `step_index` is null for a trace-level one."""

    id: str
    trace_id: str
    step_id: str | None
    step_index: int | None
    rating: int | None
    comment: str | None
    quote: Quote | None
    label_error: bool
    label_error_note: str | None
    author_id: str
    author_name: str
    created_at: datetime


@dataclass(frozen=True)
class AnnotationDraft:
    """What a new or edited annotation says, before its rules are checked."""

    rating: int | None = None
    comment: str | None = None
    quote: Quote | None = None
    label_error: bool = False
    label_error_note: str | None = None


def check_draft(draft: AnnotationDraft, step: Step | None) -> AnnotationDraft:
    """Apply the annotation rules; returns the draft with blank comments normalised to null."""
    if draft.rating not in (None, 1, -1):
        raise InvalidArgument("rating", "must be 1, -1 or null")
    comment = draft.comment if draft.comment and draft.comment.strip() else None
    if comment is not None and len(comment) > COMMENT_MAX:
        raise InvalidArgument("comment", f"must be at most {COMMENT_MAX} characters")
    if draft.rating is None and comment is None:
        raise InvalidArgument("rating", "an annotation needs a rating, a comment, or both")
    if step is not None and step.role == "system" and draft.rating is not None:
        raise InvalidArgument("rating", "system steps are context: they can carry comments but not ratings")
    if draft.quote is not None:
        _check_quote(draft.quote, step)
    return replace(draft, comment=comment)


def _check_quote(quote: Quote, step: Step | None) -> None:
    if step is None:
        raise InvalidArgument("quote", "a quote needs a step_id: it highlights text inside one step")
    if not quote.text:
        raise InvalidArgument("quote.text", "must not be empty")
    if quote.text not in step.content:
        raise InvalidArgument("quote.text", "does not occur in the step's content")


def quote_from(value: Mapping[str, str] | None) -> Quote | None:
    """A stored quote object as a Quote."""
    if not value:
        return None
    return Quote(text=value.get("text", ""), prefix=value.get("prefix", ""), suffix=value.get("suffix", ""))


def create_annotation(
    session: Session, trace_row: TraceRow, step_id: str | None, draft: AnnotationDraft, author: Author
) -> Annotation:
    """Annotate the trace (or one of its steps) as `author`."""
    stored_step = find_step(session, trace_row.id, step_id) if step_id else None
    draft = check_draft(draft, stored_step.step if stored_step else None)
    row = AnnotationRow(
        trace_id=trace_row.id,
        step_id=step_id,
        owner_id=trace_row.owner_id,
        author_id=author.id,
        author_name=author.name,
        rating=draft.rating,
        comment=draft.comment,
        quote=asdict(draft.quote) if draft.quote else None,
        label_error=draft.label_error,
        label_error_note=draft.label_error_note,
        created_at=utc_now(),
        updated_at=utc_now(),
    )
    session.add(row)
    session.flush()
    return annotation_of(row, stored_step.index if stored_step else None)


def update_annotation(
    session: Session, caller_id: str, annotation_id: str, changes: Mapping[str, object]
) -> tuple[Annotation, str]:
    """Apply a PATCH: only the fields present in `changes` change; null clears a field. Returns the annotation
    and its trace's owner. Only the author changes what an annotation says; whoever reads the trace (its owner
    or a reviewer) may flag it as a label error."""
    row = find_annotation_row(session, caller_id, annotation_id)
    unknown = set(changes) - {"rating", "comment", "label_error", "label_error_note"}
    if unknown:
        raise InvalidArgument(sorted(unknown)[0], "cannot be changed")
    if row.author_id != caller_id and set(changes) - FLAG_FIELDS:
        raise PermissionDenied(
            f"annotation {annotation_id} was written by {row.author_name}: you can change only your own "
            "annotations, or flag this one as a label error"
        )
    stored_step = find_step(session, row.trace_id, row.step_id) if row.step_id else None
    current = AnnotationDraft(row.rating, row.comment, quote_from(row.quote), row.label_error, row.label_error_note)
    draft = check_draft(replace(current, **changes), stored_step.step if stored_step else None)  # type: ignore[arg-type]
    row.rating, row.comment = draft.rating, draft.comment
    row.label_error, row.label_error_note = bool(draft.label_error), draft.label_error_note
    row.updated_at = utc_now()
    session.flush()
    return annotation_of(row, stored_step.index if stored_step else None), row.owner_id


def delete_annotation(session: Session, caller_id: str, annotation_id: str) -> str:
    """Remove an annotation: the author's own, or any on the caller's own trace. Returns the trace's owner."""
    row = find_annotation_row(session, caller_id, annotation_id)
    if row.author_id != caller_id and row.owner_id != caller_id:
        raise PermissionDenied(
            f"annotation {annotation_id} was written by {row.author_name}: a reviewer can delete only their own"
        )
    session.delete(row)
    return row.owner_id


def find_annotation_row(session: Session, caller_id: str, annotation_id: str) -> AnnotationRow:
    """An annotation on a trace the caller reads (as owner or reviewer); any other is simply not found."""
    row = session.get(AnnotationRow, annotation_id)
    if row is None or not can_read(session, caller_id, row.trace_id):
        raise NotFound(f"annotation {annotation_id} not found")
    return row


def list_annotations(session: Session, trace_ids: Sequence[str]) -> list[Annotation]:
    """Every annotation of these traces with its step's index, oldest first."""
    query = (
        select(AnnotationRow, StepRow.position)
        .outerjoin(StepRow, StepRow.id == AnnotationRow.step_id)
        .where(AnnotationRow.trace_id.in_(trace_ids))
        .order_by(AnnotationRow.created_at, AnnotationRow.id)
    )
    return [annotation_of(row, position) for row, position in session.execute(query)]


def annotation_of(row: AnnotationRow, step_index: int | None) -> Annotation:
    """The domain view of an annotation row."""
    return Annotation(
        id=row.id,
        trace_id=row.trace_id,
        step_id=row.step_id,
        step_index=step_index,
        rating=row.rating,
        comment=row.comment,
        quote=quote_from(row.quote),
        label_error=row.label_error,
        label_error_note=row.label_error_note,
        author_id=row.author_id,
        author_name=row.author_name,
        created_at=row.created_at,
    )
