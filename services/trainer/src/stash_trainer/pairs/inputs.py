"""What pair building reads: traces, their annotations and the labeler's step credit.

The trainer keeps its own frozen view instead of another service's types or the `stash.rm.v1`
messages (import-linter forbids both here); `stash_trainer.clients` converts the messages into it.
Step indices are positions: `trace.steps[i].index == i`.
"""

from __future__ import annotations

from dataclasses import dataclass

from stash_common.errors import InvalidArgument
from stash_common.steps import TraceStep


@dataclass(frozen=True)
class Annotation:
    """A person's rating (+1/-1) and/or comment on a whole trace (`step_id` None) or on one step."""

    id: str
    step_id: str | None
    rating: int | None
    comment: str | None
    label_error: bool = False
    author_id: str = ""
    # The text of the step the comment highlights, when it quotes one: a correction of that step.
    quote: str | None = None
    author_name: str = ""

    @property
    def is_correction(self) -> bool:
        """A comment quoting its step, not flagged as a label error: the shared evaluator's corrections."""
        return bool(self.comment and self.quote and self.step_id is not None and not self.label_error)

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
    """A selected trace with what supervises it: annotations and the labeler's step credits.

    `revision` is ingest's revision of the trace as read, so that the scores the training job computes
    are published for exactly that revision (0 for a trace that did not come from ingest).
    """

    id: str
    steps: tuple[TraceStep, ...]
    annotations: tuple[Annotation, ...] = ()
    credits: tuple[StepCredit, ...] = ()
    revision: int = 0

    def __post_init__(self) -> None:
        for position, step in enumerate(self.steps):
            if step.index != position:
                raise InvalidArgument(
                    f"trace {self.id}: steps[{position}].index", f"is {step.index}, expected {position}"
                )
