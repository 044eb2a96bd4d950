"""Reward statistics and display credit: how a raw reward reads as −1..+1 for people.

A checkpoint keeps the mean and spread of the rewards it gave its training texts next to its weights
(`reward_stats.json`, and `action_reward_stats.json` when it trained on action comparisons), so the
training job and every later scoring job turn a score into the same credit. Plain Python, no torch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from stash_common.errors import FailedPrecondition
from stash_common.jobs.files import describe, write_json

REWARD_STATS_FILE = "reward_stats.json"
ACTION_REWARD_STATS_FILE = "action_reward_stats.json"


@dataclass(frozen=True)
class RewardStats:
    """Mean and (population) standard deviation of raw rewards over a reference set of texts."""

    mean: float
    std: float


class _StatsFile(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    mean: float = Field(allow_inf_nan=False)
    std: float = Field(ge=0, allow_inf_nan=False)


def reward_stats(rewards: Sequence[float]) -> RewardStats:
    """The mean and standard deviation of `rewards` (at least one value)."""
    mean = math.fsum(rewards) / len(rewards)
    return RewardStats(mean, math.sqrt(math.fsum((r - mean) ** 2 for r in rewards) / len(rewards)))


def action_credit(score: float, stats: RewardStats) -> float:
    """Display credit in [-1, 1]: tanh((score − mean) / (2 × std)); a zero spread counts as 1."""
    return math.tanh((score - stats.mean) / (2 * (stats.std or 1.0)))


def write_stats(path: Path, stats: RewardStats) -> None:
    """Save reward statistics as `{"mean", "std"}` next to the checkpoint."""
    write_json(path, {"mean": stats.mean, "std": stats.std})


def read_stats(path: Path) -> RewardStats:
    """The reward statistics saved at `path`; FailedPrecondition when the file is missing or malformed."""
    if not path.is_file():
        raise FailedPrecondition(f"the checkpoint has no {path.name}")
    try:
        saved = _StatsFile.model_validate_json(path.read_bytes())
    except ValidationError as error:
        raise FailedPrecondition(f"the checkpoint's {path.name} is malformed: {describe(error)}") from error
    return RewardStats(saved.mean, saved.std)
