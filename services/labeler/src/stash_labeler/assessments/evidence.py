"""Bounded evidence for the fast model: steps rendered as events, even sampling, and evidence hashes.

An event is one step on one line, `[step_id] role tool: text`, cut to `EVENT_CHARS`; the model
refers back to steps by those ids. Hashes cover the whole steps (not the cut text), so any change
to the evidence gives a new cache key.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import orjson

from stash_common.steps import TraceStep

EVENT_CHARS = 600


def event_line(step: TraceStep) -> str:
    """One step as the model reads it."""
    who = f"{step.role} {step.tool_name}" if step.tool_name else step.role
    text = step.content
    if step.is_tool_call and step.tool_input:
        text = f"{text} {orjson.dumps(step.tool_input).decode()}".strip()
    flat = " ".join(text.split())
    return f"[{step.id}] {who}: {flat[:EVENT_CHARS]}{'…' if len(flat) > EVENT_CHARS else ''}"


def evenly(items: Sequence[TraceStep], limit: int) -> list[TraceStep]:
    """At most `limit` items spread evenly over the sequence, first and last included, in order."""
    if len(items) <= limit:
        return list(items)
    if limit <= 1:
        return list(items[:limit])
    positions = sorted({round(i * (len(items) - 1) / (limit - 1)) for i in range(limit)})
    return [items[position] for position in positions]


def evidence_hash(steps: Sequence[TraceStep]) -> str:
    """A digest of the steps' ids, roles, text, tool calls and metadata."""
    digest = hashlib.sha256()
    for step in steps:
        record = [step.id, step.role, step.content, step.tool_name, step.tool_input, step.tool_call_id, step.metadata]
        digest.update(orjson.dumps(record, option=orjson.OPT_SORT_KEYS, default=str))
    return digest.hexdigest()
