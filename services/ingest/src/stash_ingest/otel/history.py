"""The merge rule: the messages of a trace's LLM calls as one conversation, each message once.

An agent resends its whole history on every LLM call, so the calls of one trace repeat each other.
Calls are walked in start order. Each call's input steps are matched against the histories seen so
far (every earlier call's input, and its input plus output); the longest history that is a whole
prefix of this input is already in the trace, so only the steps beyond it are appended, then the
call's output steps. A trace whose calls resend the growing history yields every message once, in
order; a retried call adds only its new output; an independent call (a subagent, a fresh
conversation) shares no whole history and keeps all its messages, even a system prompt it shares
with another conversation.

Two renderings are the same message when role, content, tool call and arguments agree; metadata
such as timestamps differs between the call that produced a message and the calls that resend it.
A tool result without a tool name takes the name of the latest earlier call with its call id.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from stash_ingest.adapters.reading import to_json_text
from stash_ingest.otel.calls import Call
from stash_ingest.traces import Step

StepKey = tuple[Any, ...]


@dataclass
class _Histories:
    """Every earlier call's input (and input plus output) as a trie of step keys; ends are marked."""

    edges: dict[tuple[int, StepKey], int] = field(default_factory=dict)
    ends: set[int] = field(default_factory=lambda: {0})

    def known_prefix(self, keys: Sequence[StepKey]) -> int:
        """How many leading keys form the longest whole history already seen."""
        node, known = 0, 0
        for depth, key in enumerate(keys, start=1):
            next_node = self.edges.get((node, key))
            if next_node is None:
                break
            node = next_node
            known = depth if node in self.ends else known
        return known

    def add(self, keys: Sequence[StepKey]) -> None:
        """Remember `keys` as a whole history."""
        node = 0
        for key in keys:
            node = self.edges.setdefault((node, key), len(self.edges) + 1)
        self.ends.add(node)


def merge_calls(calls: Sequence[Call]) -> tuple[list[Step], dict[str, tuple[int, ...]]]:
    """The conversation of these calls (in start order), and the step indices each call's span contributed."""
    steps: list[Step] = []
    contributed: dict[str, tuple[int, ...]] = {}
    histories = _Histories()
    for call in calls:
        input_keys = [_step_key(step) for step in call.inputs]
        known = histories.known_prefix(input_keys)
        start = len(steps)
        steps.extend([*call.inputs[known:], *call.outputs])
        contributed[call.span.id] = tuple(range(start, len(steps)))
        histories.add(input_keys)
        histories.add([*input_keys, *(_step_key(step) for step in call.outputs)])
    return _name_tool_results(steps), contributed


def _step_key(step: Step) -> StepKey:
    """What makes two renderings of a message the same message (metadata such as timestamps aside)."""
    tool_input = to_json_text(step.tool_input) if step.tool_input is not None else None
    tool_name = step.tool_name if step.role == "assistant" else None
    return (step.role, step.content, tool_name, step.tool_call_id, tool_input)


def _name_tool_results(steps: list[Step]) -> list[Step]:
    names: dict[str, str] = {}
    named: list[Step] = []
    for step in steps:
        if step.role == "assistant" and step.tool_call_id and step.tool_name:
            names[step.tool_call_id] = step.tool_name
        if step.role == "tool" and step.tool_name is None and step.tool_call_id in names:
            step = replace(step, tool_name=names[step.tool_call_id])
        named.append(step)
    return named
