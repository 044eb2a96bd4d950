"""One trace step as the services behind ingest read it (the labeler, the trainer).

A plain dataclass, free of protobuf, so domain code can use it; `stash_common.step_messages`
converts ingest's `stash.rm.v1.Step` messages into it at the edge.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]
ROLES: tuple[Role, ...] = ("system", "user", "assistant", "tool")


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
