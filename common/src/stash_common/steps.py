"""One trace step as the services behind ingest read it (the labeler, the trainer), from `stash.rm.v1.Step`."""

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
        """An assistant step that calls a tool, whatever its text."""
        return self.role == "assistant" and self.tool_name is not None

    @property
    def is_action(self) -> bool:
        """An agent action: an assistant tool call, or an assistant message with non-blank text."""
        return self.is_tool_call or (self.role == "assistant" and bool(self.content.strip()))


def step_from_proto(message: common_pb2.Step) -> TraceStep:
    """A `stash.rm.v1.Step` as a TraceStep (tool input and metadata as plain JSON)."""
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
