"""`stash.rm.v1.Step` messages as TraceSteps: the one conversion the services behind ingest share."""

from __future__ import annotations

from stash.rm.v1 import common_pb2
from stash_common.messages import json_of
from stash_common.steps import ROLES, Role, TraceStep

# By the enum's names (STEP_ROLE_USER → user), so a new value can never be misread as another; looked up
# once here, not per step.
_ROLES: dict[int, Role] = {common_pb2.StepRole.Value(f"STEP_ROLE_{role.upper()}"): role for role in ROLES}


def _role(value: common_pb2.StepRole.ValueType) -> Role:
    role = _ROLES.get(value)
    if role is None:
        name = common_pb2.StepRole.Name(value).removeprefix("STEP_ROLE_").lower()
        raise ValueError(f"step role {name!r} is not one of {', '.join(ROLES)}")
    return role


def step_from_proto(message: common_pb2.Step) -> TraceStep:
    """A `stash.rm.v1.Step` as a TraceStep (tool input and metadata as plain JSON)."""
    return TraceStep(
        id=message.id,
        index=message.index,
        role=_role(message.role),
        content=message.content,
        tool_name=message.tool_name if message.HasField("tool_name") else None,
        tool_input=json_of(message.tool_input) if message.HasField("tool_input") else None,
        tool_call_id=message.tool_call_id if message.HasField("tool_call_id") else None,
        metadata=json_of(message.metadata),
    )
