"""Reward statistics, display credit and held-out accuracy."""

import math

import pytest

from stash_common.errors import FailedPrecondition
from stash_trainer.worker.pairs import Pair
from stash_trainer.worker.stats import (
    RewardStats,
    action_credit,
    evaluate_pairs,
    pairwise_accuracy,
    require_finite,
    reward_stats,
)


def test_reward_stats_is_the_mean_and_population_deviation() -> None:
    assert reward_stats([1.0, 3.0, 5.0, 7.0]) == RewardStats(4.0, math.sqrt(5.0))


def test_action_credit_is_tanh_of_half_a_standard_score() -> None:
    stats = RewardStats(mean=1.0, std=0.5)

    assert action_credit(1.0, stats) == 0.0
    assert action_credit(2.0, stats) == pytest.approx(math.tanh(1.0))
    assert action_credit(-1e9, stats) == -1.0


def test_action_credit_stays_finite_when_training_rewards_have_no_spread() -> None:
    assert action_credit(3.0, RewardStats(2.0, 0.0)) == pytest.approx(math.tanh(0.5))


def test_pairwise_accuracy_counts_ties_as_wrong_and_is_none_when_empty() -> None:
    assert pairwise_accuracy([0.5, 0.0, -1.0, 2.0]) == 0.5
    assert pairwise_accuracy([]) is None


def test_evaluate_pairs_reports_overall_action_and_tool_call_accuracy() -> None:
    pairs = [
        Pair("c", "r", ("a",)),
        Pair("c", "r", ("b",), "action", "response"),
        Pair("c", "r", ("c",), "action", "tool_call"),
        Pair("c", "r", ("d",), "action", "tool_call"),
    ]

    report = evaluate_pairs(pairs, [1.0, -1.0, 1.0, -1.0])

    assert (report.eval_pairs, report.eval_accuracy) == (4, 0.5)
    assert (report.action_eval_pairs, report.action_eval_accuracy) == (3, pytest.approx(1 / 3))
    assert (report.tool_eval_pairs, report.tool_eval_accuracy) == (2, 0.5)


def test_evaluate_pairs_leaves_empty_subsets_null() -> None:
    report = evaluate_pairs([Pair("c", "r", ("a",))], [1.0])

    assert (report.action_eval_pairs, report.action_eval_accuracy) == (0, None)
    assert (report.tool_eval_pairs, report.tool_eval_accuracy) == (0, None)


def test_require_finite_names_divergence() -> None:
    require_finite("rewards", [0.0, -3.5])
    with pytest.raises(FailedPrecondition, match="training diverged: rewards .* lower learning_rate"):
        require_finite("rewards", [0.0, math.nan])
