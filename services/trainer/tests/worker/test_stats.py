"""Held-out accuracy and the divergence check."""

import math

import pytest

from stash_common.errors import FailedPrecondition
from stash_trainer.worker.pairs import Pair
from stash_trainer.worker.stats import evaluate_pairs, pairwise_accuracy, require_finite


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
