"""Reward statistics, display credit, and the statistics file a checkpoint carries."""

import json
import math
from pathlib import Path

import pytest

from stash_common.errors import FailedPrecondition
from stash_common.reward_model.stats import RewardStats, action_credit, read_stats, reward_stats, write_stats


def test_reward_stats_is_the_mean_and_population_deviation() -> None:
    assert reward_stats([1.0, 3.0, 5.0, 7.0]) == RewardStats(4.0, math.sqrt(5.0))


def test_action_credit_is_tanh_of_half_a_standard_score() -> None:
    stats = RewardStats(mean=1.0, std=0.5)

    assert action_credit(1.0, stats) == 0.0
    assert action_credit(2.0, stats) == pytest.approx(math.tanh(1.0))
    assert action_credit(-1e9, stats) == -1.0


def test_action_credit_stays_finite_when_training_rewards_have_no_spread() -> None:
    assert action_credit(3.0, RewardStats(2.0, 0.0)) == pytest.approx(math.tanh(0.5))


def test_saved_stats_read_back_the_same(tmp_path: Path) -> None:
    write_stats(tmp_path / "action_reward_stats.json", RewardStats(-0.25, 1.5))

    assert json.loads((tmp_path / "action_reward_stats.json").read_text()) == {"mean": -0.25, "std": 1.5}
    assert read_stats(tmp_path / "action_reward_stats.json") == RewardStats(-0.25, 1.5)


def test_read_stats_names_a_missing_or_malformed_file(tmp_path: Path) -> None:
    with pytest.raises(FailedPrecondition, match="the checkpoint has no action_reward_stats.json"):
        read_stats(tmp_path / "action_reward_stats.json")
    (tmp_path / "reward_stats.json").write_text('{"mean": 0.0, "std": -1.0}')
    with pytest.raises(FailedPrecondition, match="reward_stats.json is malformed: std: Input should be greater"):
        read_stats(tmp_path / "reward_stats.json")
