"""Expected action credit from a saved distribution, per the spec's "Automatic action credit"."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stash_labeler.scoring.credit import anchored_distribution, expected_credit, ordinal_credit

ANCHOR_ORDER = ["strongly_negative", "negative", "neutral", "positive", "strongly_positive"]
SPEC_EXAMPLE = {"negative": 0.1, "neutral": 0.2, "positive": 0.6, "strongly_positive": 0.1}


def test_expected_credit_of_the_spec_example() -> None:
    assert expected_credit(SPEC_EXAMPLE) == pytest.approx(0.35)


@pytest.mark.parametrize(
    ("label", "credit"),
    [("strongly_negative", -1.0), ("negative", -0.5), ("neutral", 0.0), ("positive", 0.5), ("strongly_positive", 1.0)],
)
def test_each_label_anchors_its_credit(label: str, credit: float) -> None:
    assert expected_credit({label: 1.0}) == credit


def test_insufficient_evidence_mass_is_excluded() -> None:
    halved = {label: p / 2 for label, p in SPEC_EXAMPLE.items()}

    assert expected_credit({**halved, "insufficient_evidence": 0.5}) == pytest.approx(0.35)


def test_expected_credit_renormalises_partial_mass() -> None:
    assert expected_credit({"strongly_positive": 0.2, "negative": 0.2}) == pytest.approx((0.2 * 1.0 - 0.2 * 0.5) / 0.4)


def test_all_mass_on_insufficient_evidence_is_unscored() -> None:
    assert expected_credit({"insufficient_evidence": 1.0}) is None


def test_zero_mass_on_the_anchors_is_unscored() -> None:
    assert expected_credit({"positive": 0.0, "insufficient_evidence": 0.0}) is None


def test_integer_probabilities_are_read() -> None:
    assert expected_credit({"positive": 1, "negative": 0}) == 0.5


@pytest.mark.parametrize(
    "distribution",
    [
        None,
        {},
        [("positive", 1.0)],
        "positive",
        {"great": 1.0},
        {"positive": 0.5, "great": 0.5},
        {"positive": -0.1, "neutral": 1.0},
        {"positive": 1.5},
        {"positive": math.nan},
        {"positive": math.inf},
        {"positive": True},
        {"positive": "0.5"},
        {"positive": None},
        {"positive": 0.5, "insufficient_evidence": -0.5},
        {"positive": 0.5, "insufficient_evidence": "a lot"},
    ],
    ids=[
        "missing",
        "empty",
        "list",
        "string",
        "unknown-label",
        "unknown-beside-known",
        "negative-probability",
        "above-one",
        "nan",
        "inf",
        "bool",
        "string-probability",
        "null-probability",
        "negative-insufficient",
        "string-insufficient",
    ],
)
def test_malformed_distribution_is_unscored(distribution: object) -> None:
    assert expected_credit(distribution) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("credit", "band"),
    [
        (0.0, 0),
        (0.2, 0),
        (-0.2, 0),
        (0.2001, 1),
        (-0.2001, -1),
        (0.35, 1),
        (0.5999, 1),
        (-0.5999, -1),
        (0.6, 2),
        (-0.6, -2),
        (1.0, 2),
        (-1.0, -2),
    ],
)
def test_ordinal_band_at_and_around_its_edges(credit: float, band: int) -> None:
    assert ordinal_credit(credit) == band


@pytest.mark.parametrize(
    ("credit", "distribution"),
    [
        (-1.0, {"strongly_negative": 1.0}),
        (-0.75, {"strongly_negative": 0.5, "negative": 0.5}),
        (0.0, {"neutral": 1.0}),
        (0.27, {"neutral": 0.46, "positive": 0.54}),
        (0.5, {"positive": 1.0}),
        (0.9, {"positive": 0.2, "strongly_positive": 0.8}),
        (1.0, {"strongly_positive": 1.0}),
    ],
)
def test_anchored_distribution_uses_the_two_anchors_around_the_credit(
    credit: float, distribution: dict[str, float]
) -> None:
    assert anchored_distribution(credit) == pytest.approx(distribution)


@pytest.mark.parametrize(("credit", "clamped"), [(1.3, {"strongly_positive": 1.0}), (-7.0, {"strongly_negative": 1.0})])
def test_anchored_distribution_clamps_out_of_range_credit(credit: float, clamped: dict[str, float]) -> None:
    assert anchored_distribution(credit) == clamped


@given(credit=st.floats(-1.0, 1.0))
def test_anchored_distribution_reproduces_its_credit(credit: float) -> None:
    distribution = anchored_distribution(credit)
    positions = sorted(ANCHOR_ORDER.index(label) for label in distribution)

    assert expected_credit(distribution) == pytest.approx(credit, abs=1e-9)
    assert 1 <= len(positions) <= 2
    assert positions[-1] - positions[0] <= 1
    assert all(p > 0 for p in distribution.values())
    assert math.fsum(distribution.values()) == pytest.approx(1.0)
