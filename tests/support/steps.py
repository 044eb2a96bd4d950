"""Trace steps from short specs for the rendering and pair tests (step ids `<trace>:<index>`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stash_common.steps import TraceStep

# ("system" | "user" | "assistant", text), ("call", tool, input) or ("call", tool, input, text), ("tool", tool, result)
StepSpec = tuple[Any, ...]

SUPPORT: tuple[StepSpec, ...] = (
    ("system", "You are a support agent."),
    ("user", "I want a refund for order 1182"),
    ("call", "lookup_order", {"order_id": "1182"}),
    ("tool", "lookup_order", '{"status": "delivered"}'),
    ("assistant", "Your refund for order 1182 is on its way."),
    ("user", "That is the wrong order, I said 1128!"),
    ("assistant", "Sorry, refunding order 1128 now."),
    ("user", "Thanks, that works!"),
)
"""A refund conversation: a lookup (2), a wrong answer (4), a complaint (5), a repair (6) and thanks (7)."""


def build_step(trace_id: str, index: int, spec: StepSpec) -> TraceStep:
    """One step from its spec."""
    kind, *rest = spec
    step_id = f"{trace_id}:{index}"
    if kind == "call":
        tool, tool_input, *text = rest
        return TraceStep(step_id, index, "assistant", text[0] if text else "", tool, tool_input, f"call-{index}")
    if kind == "tool":
        tool, result = rest
        return TraceStep(step_id, index, "tool", result, tool, None, f"call-{index - 1}")
    return TraceStep(step_id, index, kind, rest[0])


def build_steps(trace_id: str, specs: Sequence[StepSpec]) -> tuple[TraceStep, ...]:
    """The steps of a trace, one per spec, in order."""
    return tuple(build_step(trace_id, index, spec) for index, spec in enumerate(specs))
