"""The labeler's read-only view of ingest's traces, and what the labeler needs ingest to answer.

Ingest owns traces; the labeler only reads them, at one revision at a time, through `TraceSource`.
`clients.IngestClient` is the gRPC implementation, where ingest's messages become these
dataclasses and its statuses become `stash_common.errors`, so nothing past the edge sees a message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from stash_common.errors import StashError
from stash_common.steps import TraceStep


@dataclass(frozen=True)
class LabelerTrace:
    """A trace at one revision, as the labeler reads it."""

    id: str
    owner_id: str
    revision: int
    source_format: str
    steps: tuple[TraceStep, ...]
    metadata: dict[str, Any] = field(default_factory=dict)
    external_id: str | None = None


@dataclass(frozen=True)
class TraceRevision:
    """One revision of one owner's trace: what an evaluation is of."""

    owner_id: str
    trace_id: str
    revision: int


@dataclass(frozen=True)
class RevisionPage:
    """Revisions changed after a cursor, and the cursor to read on from."""

    revisions: tuple[TraceRevision, ...]
    next_cursor: str


# A wanted revision as read: the trace, or the error saying why there is none (NotFound, FailedPrecondition).
RevisionRead = LabelerTrace | StashError


class TraceSource(Protocol):
    """Where the labeler reads traces (ingest).

    Failures are `stash_common.errors`: `NotFound` (deleted or another owner's), `FailedPrecondition`
    (the revision was superseded), `Unavailable` (out of reach; try again later).
    """

    def trace_revision(self, owner_id: str, trace_id: str, revision: int) -> LabelerTrace:
        """The trace as of `revision`."""
        ...

    def trace_revisions(self, wanted: Sequence[TraceRevision]) -> list[RevisionRead]:
        """Each wanted revision's trace, or why there is none, in order (Unavailable is raised, not returned)."""
        ...

    def current_revision(self, owner_id: str, trace_id: str) -> int:
        """The trace's newest revision."""
        ...

    def changed_revisions(self, cursor: str, limit: int) -> RevisionPage:
        """The latest revisions of traces changed after `cursor`, across owners, oldest change first."""
        ...
