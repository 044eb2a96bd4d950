"""The labeler's read-only view of a trace revision, converted from the ingest service's messages."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stash_common.messages import json_of
from stash_common.steps import TraceStep, step_from_proto


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


def trace_from_proto(owner_id: str, message: Any) -> LabelerTrace:
    """A `stash.rm.v1.Trace` as a LabelerTrace."""
    return LabelerTrace(
        id=message.id,
        owner_id=owner_id,
        revision=message.revision,
        source_format=message.source_format,
        steps=tuple(step_from_proto(step) for step in message.steps),
        metadata=json_of(message.metadata),
        external_id=message.external_id if message.HasField("external_id") else None,
    )
