"""The labeler's read-only view of a trace revision, converted from the ingest service's messages."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from stash.rm.v1 import common_pb2
from stash_common.messages import json_of

Role = Literal["system", "user", "assistant", "tool"]
_ROLES: dict[int, Role] = {
    common_pb2.STEP_ROLE_SYSTEM: "system",
    common_pb2.STEP_ROLE_USER: "user",
    common_pb2.STEP_ROLE_ASSISTANT: "assistant",
    common_pb2.STEP_ROLE_TOOL: "tool",
}


@dataclass(frozen=True)
class TraceStep:
    """One step: a message, a tool call (assistant with `tool_name`) or a tool result (role `tool`)."""

    id: str
    index: int
    role: Role
    content: str
    tool_name: str | None = None
    tool_input: dict[str, Any] | None = None
    tool_call_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def is_tool_call(self) -> bool:
        """An assistant step that calls a tool."""
        return self.role == "assistant" and self.tool_name is not None


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


def step_from_proto(message: Any) -> TraceStep:
    """A `stash.rm.v1.Step` as a TraceStep."""
    return TraceStep(
        id=message.id,
        index=message.index,
        role=_ROLES[message.role],
        content=message.content,
        tool_name=message.tool_name if message.HasField("tool_name") else None,
        tool_input=json_of(message.tool_input) if message.HasField("tool_input") else None,
        tool_call_id=message.tool_call_id if message.HasField("tool_call_id") else None,
        metadata=json_of(message.metadata),
    )


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
