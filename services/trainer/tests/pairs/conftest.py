"""Builders of source traces for the pair tests: steps from short specs, step ids `<trace>:<index>`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import pytest

from stash_trainer.pairs.inputs import Annotation, SourceTrace, StepCredit
from support.steps import SUPPORT, StepSpec, build_steps

TraceBuilder = Callable[..., SourceTrace]


def build_trace(
    trace_id: str,
    specs: Sequence[StepSpec],
    ratings: Mapping[int | None, int | Sequence[int]] | None = None,
    credits: Mapping[int, float | None] | None = None,
    annotations: Sequence[Annotation] = (),
) -> SourceTrace:
    """A trace with `ratings` by step index (None = the whole trace) and expected `credits` by step index."""
    steps = build_steps(trace_id, specs)
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


@pytest.fixture
def make_trace() -> TraceBuilder:
    """`make_trace(trace_id, specs, ratings=None, credits=None, annotations=())`."""
    return build_trace


@pytest.fixture
def support_specs() -> tuple[StepSpec, ...]:
    """A refund conversation: a lookup (2), a wrong answer (4), a complaint (5), a repair (6) and thanks (7)."""
    return SUPPORT
