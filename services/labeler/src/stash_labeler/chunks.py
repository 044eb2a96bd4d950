"""Cutting a trace into chunks: a user message, an agent message, or a tool call with its result.

System steps are context, never chunks. A tool result joins the call with the same `tool_call_id`
(or, for traces without call ids, the nearest earlier call of the same tool still waiting for one);
a result whose call is not in the trace stands alone as an agent chunk. Chunk ids are `c<ordinal>`,
so a growing trace keeps the ids of its earlier chunks; `fingerprint` changes whenever anything a
label could depend on inside the chunk changes, which is how an unchanged chunk keeps its label.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

import orjson

from stash_common.steps import TraceStep
from stash_labeler.traces import LabelerTrace

ChunkKind = Literal["user", "agent_message", "tool_call"]


@dataclass(frozen=True, slots=True)
class Chunk:
    """Consecutive unit of labeling: one or two steps (a call and its result)."""

    chunk_id: str
    kind: ChunkKind
    steps: tuple[TraceStep, ...]

    @property
    def actor(self) -> Literal["user", "agent"]:
        """Who acted."""
        return "user" if self.kind == "user" else "agent"

    @property
    def action(self) -> TraceStep:
        """The step that carries the chunk's score: the message or the call."""
        return self.steps[0]

    @property
    def result(self) -> TraceStep | None:
        """The tool result, for a tool call that has one."""
        return self.steps[1] if self.kind == "tool_call" and len(self.steps) > 1 else None

    @property
    def fingerprint(self) -> str:
        """A digest of everything inside the chunk a label reads."""
        parts = [
            (step.role, step.content, step.tool_name, step.tool_input, step.tool_call_id, _flags(step))
            for step in self.steps
        ]
        return hashlib.sha256(orjson.dumps(parts, option=orjson.OPT_SORT_KEYS)).hexdigest()[:32]

    @property
    def char_count(self) -> int:
        """Characters of content and tool input, for the labeling size limits."""
        return sum(len(step.content) + len(orjson.dumps(step.tool_input or {})) for step in self.steps)


def _flags(step: TraceStep) -> dict[str, object]:
    return {key: step.metadata[key] for key in ("is_error", "exit_code") if key in step.metadata}


def cut_chunks(trace: LabelerTrace) -> list[Chunk]:
    """The trace's chunks in step order."""
    groups: list[list[TraceStep]] = []
    open_calls: dict[str, list[TraceStep]] = {}
    for step in trace.steps:
        if step.role == "system":
            continue
        if step.role == "tool":
            call = _pop_call(open_calls, step)
            if call is not None:
                call.append(step)
                continue
        group = [step]
        groups.append(group)
        if step.is_tool_call:
            open_calls[_call_key(step)] = group
    return [Chunk(f"c{ordinal}", _kind(group[0]), tuple(group)) for ordinal, group in enumerate(groups)]


def _call_key(step: TraceStep) -> str:
    return step.tool_call_id or f"name:{step.tool_name}:{step.index}"


def _pop_call(open_calls: dict[str, list[TraceStep]], result: TraceStep) -> list[TraceStep] | None:
    if result.tool_call_id:
        return open_calls.pop(result.tool_call_id, None)
    for key, group in reversed(open_calls.items()):
        if key.startswith("name:") and group[0].tool_name == result.tool_name:
            return open_calls.pop(key)
    return None


def _kind(step: TraceStep) -> ChunkKind:
    if step.role == "user":
        return "user"
    return "tool_call" if step.is_tool_call or step.role == "tool" else "agent_message"
