"""Exports: the owner's traces as canonical JSONL, and their annotations as JSONL.

Both stream one trace at a time, each in its own short read transaction, so an export of
many traces neither holds one long transaction nor loads everything into memory.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import orjson
from sqlalchemy.orm import Session, sessionmaker

from stash_common.db import transaction
from stash_ingest import store
from stash_ingest.adapters.stash import dump_stash
from stash_ingest.annotations import Annotation, list_annotations


def export_traces(sessions: sessionmaker[Session], owner_id: str, trace_ids: Sequence[str]) -> Iterator[bytes]:
    """One Stash Trace Format line per trace, oldest import first; re-importing gives the same traces."""
    for trace_id in _trace_ids(sessions, owner_id, trace_ids):
        with transaction(sessions) as session:
            trace = store.load_trace(session, store.find_trace_row(session, owner_id, trace_id))
        yield dump_stash(trace.canonical()) + b"\n"


def export_annotations(sessions: sessionmaker[Session], owner_id: str, trace_ids: Sequence[str]) -> Iterator[bytes]:
    """One line per annotation: the spec's annotation export shape."""
    for trace_id in _trace_ids(sessions, owner_id, trace_ids):
        with transaction(sessions) as session:
            row = store.find_trace_row(session, owner_id, trace_id)
            lines = [annotation_line(annotation, row.external_id) for annotation in list_annotations(session, [row.id])]
        if lines:
            yield b"".join(lines)


def annotation_line(annotation: Annotation, external_id: str | None) -> bytes:
    """`{trace_id, trace_external_id, step_index, rating, comment, quote, label_error, label_error_note, author,
    author_id, author_name, created_at}`: `author` is the author's name, as the spec's example has it."""
    quote = annotation.quote
    record = {
        "trace_id": annotation.trace_id,
        "trace_external_id": external_id,
        "step_index": annotation.step_index,
        "rating": annotation.rating,
        "comment": annotation.comment,
        "quote": {"text": quote.text, "prefix": quote.prefix, "suffix": quote.suffix} if quote else None,
        "label_error": annotation.label_error,
        "label_error_note": annotation.label_error_note,
        "author": annotation.author_name,
        "author_id": annotation.author_id,
        "author_name": annotation.author_name,
        "created_at": annotation.created_at.isoformat().replace("+00:00", "Z"),
    }
    return orjson.dumps(record) + b"\n"


def _trace_ids(sessions: sessionmaker[Session], owner_id: str, trace_ids: Sequence[str]) -> list[str]:
    with transaction(sessions) as session:
        return [row.id for row in store.owner_trace_rows(session, owner_id, trace_ids)]
