"""Builders of source traces for the pair tests: steps from short specs, step ids `<trace>:<index>`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

from stash_common.steps import TraceStep
from stash_trainer.pairs.inputs import Annotation, SourceTrace, StepCredit

# ("system" | "user" | "assistant", text), ("call", tool, input) or ("call", tool, input, text), ("tool", tool, result)
StepSpec = tuple[Any, ...]
TraceBuilder = Callable[..., SourceTrace]


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


def build_trace(
    trace_id: str,
    specs: Sequence[StepSpec],
    ratings: Mapping[int | None, int | Sequence[int]] | None = None,
    credits: Mapping[int, float | None] | None = None,
    annotations: Sequence[Annotation] = (),
) -> SourceTrace:
    """A trace with `ratings` by step index (None = the whole trace) and expected `credits` by step index."""
    steps = tuple(build_step(trace_id, index, spec) for index, spec in enumerate(specs))
    rated = []
    for index, values in (ratings or {}).items():
        for number, value in enumerate([values] if isinstance(values, int) else values):
            step_id = None if index is None else f"{trace_id}:{index}"
            rated.append(Annotation(f"{trace_id}-a{index}-{number}", step_id, value, None, False, "henry"))
    scored = tuple(
        StepCredit(f"{trace_id}:{index}", credit, None if credit is None else round(credit * 2))
        for index, credit in (credits or {}).items()
    )
    return SourceTrace(trace_id, steps, (*rated, *annotations), scored)


SUPPORT = (
    ("system", "You are a support agent."),
    ("user", "I want a refund for order 1182"),
    ("call", "lookup_order", {"order_id": "1182"}),
    ("tool", "lookup_order", '{"status": "delivered"}'),
    ("assistant", "Your refund for order 1182 is on its way."),
    ("user", "That is the wrong order, I said 1128!"),
    ("assistant", "Sorry, refunding order 1128 now."),
    ("user", "Thanks, that works!"),
)


@pytest.fixture
def make_trace() -> TraceBuilder:
    """`make_trace(trace_id, specs, ratings=None, credits=None, annotations=())`."""
    return build_trace


@pytest.fixture
def support_specs() -> tuple[StepSpec, ...]:
    """A refund conversation: a lookup (2), a wrong answer (4), a complaint (5), a repair (6) and thanks (7)."""
    return SUPPORT
