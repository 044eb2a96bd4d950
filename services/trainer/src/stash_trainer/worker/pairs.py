"""Preference pairs as the worker sees them, and capping a dataset to `max_pairs`."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Pair:
    """A chosen and a rejected rendered text (prior context, then the target action) from source traces."""

    chosen: str
    rejected: str
    trace_ids: tuple[str, ...]
    granularity: str = "trace"
    action_type: str | None = None

    @property
    def is_action(self) -> bool:
        """Whether the pair compares two assistant actions (a response or a tool call)."""
        return self.granularity == "action"

    @property
    def is_tool_call(self) -> bool:
        """Whether the pair compares two tool calls."""
        return self.is_action and self.action_type == "tool_call"


def cap_pairs(pairs: Sequence[Pair], max_pairs: int, seed: int) -> list[Pair]:
    """At most `max_pairs` pairs: a seeded sample that keeps the input order, or all of them."""
    if len(pairs) <= max_pairs:
        return list(pairs)
    kept = sorted(random.Random(seed).sample(range(len(pairs)), max_pairs))
    return [pairs[i] for i in kept]
