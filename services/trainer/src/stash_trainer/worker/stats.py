"""Held-out accuracy and divergence checks: the numbers around a training run.

Reward statistics and display credit are shared with the scorer (`stash_common.reward_model.stats`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from stash_common.errors import FailedPrecondition
from stash_trainer.worker.pairs import Pair


@dataclass(frozen=True)
class EvalReport:
    """Held-out pair counts and accuracies (None when that set is empty): overall, actions, tool calls."""

    eval_pairs: int = 0
    eval_accuracy: float | None = None
    action_eval_pairs: int = 0
    action_eval_accuracy: float | None = None
    tool_eval_pairs: int = 0
    tool_eval_accuracy: float | None = None


def pairwise_accuracy(margins: Sequence[float]) -> float | None:
    """The share of pairs whose chosen text outscores the rejected one (a tie is wrong); None when empty."""
    return sum(margin > 0 for margin in margins) / len(margins) if margins else None


def evaluate_pairs(pairs: Sequence[Pair], margins: Sequence[float]) -> EvalReport:
    """Counts and accuracies of held-out `pairs` given each pair's reward margin r(chosen) − r(rejected)."""

    def subset(keep: Callable[[Pair], bool]) -> list[float]:
        return [margin for pair, margin in zip(pairs, margins, strict=True) if keep(pair)]

    actions, tools = subset(lambda pair: pair.is_action), subset(lambda pair: pair.is_tool_call)
    return EvalReport(
        eval_pairs=len(margins),
        eval_accuracy=pairwise_accuracy(margins),
        action_eval_pairs=len(actions),
        action_eval_accuracy=pairwise_accuracy(actions),
        tool_eval_pairs=len(tools),
        tool_eval_accuracy=pairwise_accuracy(tools),
    )


def require_finite(name: str, values: Sequence[float]) -> None:
    """Fail with advice when training produced a NaN or infinite loss or reward (it diverged)."""
    if not all(math.isfinite(value) for value in values):
        raise FailedPrecondition(f"training diverged: {name} contains NaN or infinity; lower learning_rate and retry")
