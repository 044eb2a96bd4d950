"""Reward statistics, display credit and held-out accuracy: the numbers around a trained model."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from stash_common.errors import FailedPrecondition
from stash_trainer.worker.pairs import Pair


@dataclass(frozen=True)
class RewardStats:
    """Mean and (population) standard deviation of raw rewards over a reference set of texts."""

    mean: float
    std: float


@dataclass(frozen=True)
class EvalReport:
    """Held-out pair counts and accuracies (None when that set is empty): overall, actions, tool calls."""

    eval_pairs: int = 0
    eval_accuracy: float | None = None
    action_eval_pairs: int = 0
    action_eval_accuracy: float | None = None
    tool_eval_pairs: int = 0
    tool_eval_accuracy: float | None = None


def reward_stats(rewards: Sequence[float]) -> RewardStats:
    """The mean and standard deviation of `rewards` (at least one value)."""
    mean = math.fsum(rewards) / len(rewards)
    return RewardStats(mean, math.sqrt(math.fsum((r - mean) ** 2 for r in rewards) / len(rewards)))


def action_credit(score: float, stats: RewardStats) -> float:
    """Display credit in [-1, 1]: tanh((score − mean) / (2 × std)); a zero spread counts as 1."""
    return math.tanh((score - stats.mean) / (2 * (stats.std or 1.0)))


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
