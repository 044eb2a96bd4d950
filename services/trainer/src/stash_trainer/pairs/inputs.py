"""What pair building reads: traces, their annotations and the labeler's step credit, converted from `stash.rm.v1`.

The trainer keeps its own frozen view instead of importing another service's types (import-linter
forbids it). Step indices are positions: `trace.steps[i].index == i`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from stash.rm.v1 import common_pb2, labeler_pb2
from stash_common.errors import InvalidArgument
from stash_common.steps import TraceStep, step_from_proto


@dataclass(frozen=True)
class Annotation:
    """A person's rating (+1/-1) and/or comment on a whole trace (`step_id` None) or on one step."""

    id: str
    step_id: str | None
    rating: int | None
    comment: str | None
    label_error: bool = False
    author_id: str = ""

    @property
    def usable_rating(self) -> int | None:
        """The rating that trains: +1 or -1, never from an annotation flagged as a label error."""
        return self.rating if self.rating in (1, -1) and not self.label_error else None


@dataclass(frozen=True)
class StepCredit:
    """The labeler's credit of one step; both values are None when the step is unscored."""

    step_id: str
    expected_credit: float | None
    ordinal_credit: int | None


@dataclass(frozen=True)
class SourceTrace:
    """A selected trace with what supervises it: annotations and the labeler's step credits."""

    id: str
    steps: tuple[TraceStep, ...]
    annotations: tuple[Annotation, ...] = ()
    credits: tuple[StepCredit, ...] = ()

    def __post_init__(self) -> None:
        for position, step in enumerate(self.steps):
            if step.index != position:
                raise InvalidArgument(
                    f"trace {self.id}: steps[{position}].index", f"is {step.index}, expected {position}"
                )


def annotation_from_proto(message: common_pb2.Annotation) -> Annotation:
    """A `stash.rm.v1.Annotation` as an Annotation."""
    return Annotation(
        id=message.id,
        step_id=message.step_id if message.HasField("step_id") else None,
        rating=message.rating if message.HasField("rating") else None,
        comment=message.comment if message.HasField("comment") else None,
        label_error=message.label_error,
        author_id=message.author_id,
    )


def credit_from_proto(message: labeler_pb2.StepEvaluation) -> StepCredit:
    """A step's credit; an expected credit that is missing, not finite or outside -1..+1 leaves the step unscored."""
    expected = message.expected_credit if message.HasField("expected_credit") else None
    if expected is not None and not (math.isfinite(expected) and -1.0 <= expected <= 1.0):
        expected = None
    ordinal = message.ordinal_credit if message.HasField("ordinal_credit") else None
    return StepCredit(step_id=message.step_id, expected_credit=expected, ordinal_credit=ordinal)


def trace_from_proto(
    trace: common_pb2.Trace,
    annotations: Iterable[common_pb2.Annotation],
    evaluation: labeler_pb2.TraceEvaluation | None,
) -> SourceTrace:
    """A trace, its annotations and its labeler evaluation as a SourceTrace.

    Only a succeeded evaluation supplies credit; without one every step is unscored. Credits of
    steps the trace no longer has are dropped (step ids are immutable, so the others still apply).
    """
    steps = tuple(step_from_proto(step) for step in trace.steps)
    own = []
    for annotation in annotations:
        if annotation.trace_id != trace.id:
            raise InvalidArgument(
                "annotations", f"annotation {annotation.id} belongs to trace {annotation.trace_id}, not {trace.id}"
            )
        own.append(annotation_from_proto(annotation))
    return SourceTrace(id=trace.id, steps=steps, annotations=tuple(own), credits=_credits(steps, evaluation))


def _credits(steps: tuple[TraceStep, ...], evaluation: labeler_pb2.TraceEvaluation | None) -> tuple[StepCredit, ...]:
    if evaluation is None or evaluation.status != common_pb2.JOB_STATUS_SUCCEEDED:
        return ()
    known = {step.id for step in steps}
    return tuple(credit_from_proto(step) for step in evaluation.steps if step.step_id in known)
