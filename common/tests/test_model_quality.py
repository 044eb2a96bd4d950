"""The honest reading of a model's metrics: Wilson intervals, the minimum sample, the loss against chance."""

from __future__ import annotations

import math

import pytest

from stash_common.model_quality import (
    CHANCE_LOSS,
    MIN_EVAL_PAIRS,
    accuracy_reading,
    loss_reading,
    model_quality,
    wilson_interval,
)


def test_the_wilson_interval_matches_its_textbook_values() -> None:
    assert wilson_interval(8, 10) == (pytest.approx(0.4902, abs=1e-4), pytest.approx(0.9433, abs=1e-4))
    assert wilson_interval(0, 5) == (0.0, pytest.approx(0.4345, abs=1e-4))
    assert wilson_interval(5, 5) == (pytest.approx(0.5655, abs=1e-4), 1.0)


@pytest.mark.parametrize(("correct", "total"), [(0, 0), (3, 2), (-1, 4)])
def test_the_wilson_interval_refuses_impossible_counts(correct: int, total: int) -> None:
    with pytest.raises(ValueError, match="need 0 <= correct <= total"):
        wilson_interval(correct, total)


def test_an_accuracy_on_enough_pairs_reads_with_its_count_and_interval() -> None:
    reading = accuracy_reading(0.9, 40, "pair")

    assert (reading["pairs"], reading["correct"], reading["accuracy"], reading["measured"]) == (40, 36, 0.9, True)
    low, high = reading["interval"]
    assert 0.76 < low < 0.77 and 0.96 < high < 0.97
    assert reading["summary"] == "90 % of 40 held-out pairs scored the right way round (95 % interval 77 %–96 %)"


def test_below_the_minimum_an_accuracy_is_too_few_pairs_to_measure_not_a_percentage() -> None:
    reading = accuracy_reading(2 / 3, 3, "pair")

    assert reading["measured"] is False and (reading["pairs"], reading["correct"]) == (3, 2)
    assert reading["summary"] == f"too few held-out pairs to measure (3 held-out pairs; at least {MIN_EVAL_PAIRS})"
    assert "%" not in reading["summary"]
    assert accuracy_reading(1.0, MIN_EVAL_PAIRS, "pair")["measured"] is True


def test_an_accuracy_without_held_out_pairs_is_not_measured() -> None:
    assert accuracy_reading(None, 0, "action pair") == {
        "pairs": 0,
        "correct": None,
        "accuracy": None,
        "interval": None,
        "measured": False,
        "summary": "not measured: no held-out action pairs",
    }


def test_a_loss_left_at_chance_warns_and_a_learned_one_does_not() -> None:
    stuck, learned = loss_reading(0.6819), loss_reading(0.21)

    assert stuck["moved"] is False and "did not move the loss off chance (ln 2 = 0.693)" in stuck["warning"]
    assert learned["moved"] is True and learned["warning"] is None
    assert learned["summary"] == "0.2100 (chance is ln 2 = 0.693; Bradley–Terry, lower is better)"
    assert stuck["chance"] == CHANCE_LOSS == math.log(2)
    assert loss_reading(None)["moved"] is None


def test_a_models_quality_reads_every_accuracy_and_the_loss() -> None:
    metrics = {"eval_pairs": 12, "eval_accuracy": 0.75, "action_eval_pairs": 12, "action_eval_accuracy": 0.75}
    quality = model_quality({**metrics, "tool_eval_pairs": 0, "tool_eval_accuracy": None, "final_loss": 0.3})

    assert quality is not None and quality["min_eval_pairs"] == MIN_EVAL_PAIRS
    assert quality["eval"]["correct"] == quality["action_eval"]["correct"] == 9
    assert quality["tool_eval"]["measured"] is False and quality["loss"]["moved"] is True
    assert model_quality(None) is None
