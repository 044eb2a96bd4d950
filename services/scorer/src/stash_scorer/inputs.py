"""What the scorer reads from its peers, as its own dataclasses, and the sources it reads them from.

Ingest owns traces and the trainer owns reward models; the scorer only reads them, through
`TraceSource` and `ModelSource`. `stash_scorer.clients` implements both over gRPC: there a message
becomes one of these dataclasses and a failed call a `stash_common.errors` type, so the scoring policy
(requests, publishing, batching, background scoring) never sees a message or a gRPC status.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from stash_common.steps import TraceStep

# The only version of per-action credit there is (`metrics.action_scoring_version` of a trained model).
ACTION_SCORING_VERSION = 1


@dataclass(frozen=True)
class ScorerTrace:
    """A trace at one revision, as the scorer reads it."""

    id: str
    owner_id: str
    revision: int
    steps: tuple[TraceStep, ...]

    @property
    def actions(self) -> tuple[TraceStep, ...]:
        """The eligible actions: nonempty assistant responses and tool calls, in step order."""
        return tuple(step for step in self.steps if step.is_action)


@dataclass(frozen=True)
class TraceRevision:
    """The current revision of one owner's trace, as ingest's change list reports it."""

    owner_id: str
    trace_id: str
    revision: int
    updated_at: datetime


@dataclass(frozen=True)
class RevisionPage:
    """Revisions changed after a cursor, and the cursor to read on from."""

    revisions: tuple[TraceRevision, ...]
    next_cursor: str


@dataclass(frozen=True)
class RewardModel:
    """A reward model as the trainer reports it: enough to decide whether it can score, and with what."""

    id: str
    owner_id: str
    name: str
    status: str  # queued, running, succeeded or failed
    artifact_key: str | None
    action_scoring_version: int | None

    @property
    def scores_actions(self) -> bool:
        """Whether the model was trained with action comparisons and saved their reward statistics."""
        return self.action_scoring_version == ACTION_SCORING_VERSION


class TraceSource(Protocol):
    """Where the scorer reads traces (ingest).

    Failures are `stash_common.errors`: `NotFound` (deleted or another owner's), `FailedPrecondition`
    (the revision was superseded), `Unavailable` (out of reach; try again later).
    """

    def current_trace(self, owner_id: str, trace_id: str) -> ScorerTrace:
        """The trace at its newest revision."""
        ...

    def trace_revision(self, owner_id: str, trace_id: str, revision: int) -> ScorerTrace:
        """The trace as of `revision`, while that is still its newest one."""
        ...

    def changed_revisions(
        self, cursor: str, limit: int, owner_id: str | None = None, include_unsettled: bool = False
    ) -> RevisionPage:
        """The newest revisions of traces changed after `cursor` (one owner's, or all), oldest change first;
        only the changes older than ingest's settle window unless `include_unsettled`."""
        ...

    def existing(self, owner_id: str, trace_ids: Sequence[str]) -> set[str]:
        """Those of `trace_ids` the owner still has."""
        ...


class ModelSource(Protocol):
    """Where the scorer learns about reward models (the trainer); another owner's model is `NotFound`."""

    def reward_model(self, owner_id: str, model_id: str) -> RewardModel:
        """The owner's model as it is now."""
        ...
