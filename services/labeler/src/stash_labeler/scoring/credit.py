"""Expected action credit: a probability distribution over five credit labels, read as one number.

The five substantive labels anchor −1, −0.5, 0, +0.5 and +1. Expected credit is their
probability-weighted average divided by the probability they hold together, so the mass of
`insufficient_evidence` is left out rather than read as neutral. A distribution that is missing,
malformed, or puts no mass on the five labels stays unscored (None). Legacy ordinal credit (−2..2)
is the band a credit falls in.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

ANCHORS: dict[str, float] = {
    "strongly_negative": -1.0,
    "negative": -0.5,
    "neutral": 0.0,
    "positive": 0.5,
    "strongly_positive": 1.0,
}
INSUFFICIENT_EVIDENCE = "insufficient_evidence"
CREDIT_LABELS = (*ANCHORS, INSUFFICIENT_EVIDENCE)
CREDIT_METHOD = "probability_weighted_v1"
ORDINAL_EDGE = 0.6  # |credit| at or beyond it is ±2
NEUTRAL_EDGE = 0.2  # |credit| at or within it is 0


def expected_credit(distribution: Mapping[str, Any] | None) -> float | None:
    """The probability-weighted credit of a saved distribution, or None when it cannot be read."""
    if not isinstance(distribution, Mapping) or not distribution:
        return None
    if any(label not in CREDIT_LABELS for label in distribution):
        return None
    probabilities = [distribution.get(label, 0.0) for label in ANCHORS]
    if not all(_is_probability(p) for p in [*probabilities, distribution.get(INSUFFICIENT_EVIDENCE, 0.0)]):
        return None
    mass = math.fsum(probabilities)
    if mass <= 0.0:
        return None
    weighted = math.fsum(p * anchor for p, anchor in zip(probabilities, ANCHORS.values(), strict=True))
    return round(weighted / mass, 10)


def _is_probability(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and 0 <= value <= 1


def ordinal_credit(credit: float) -> int:
    """The legacy −2..2 category of a credit in −1..+1, symmetric around zero."""
    magnitude = abs(credit)
    band = 2 if magnitude >= ORDINAL_EDGE else 0 if magnitude <= NEUTRAL_EDGE else 1
    return band if credit >= 0 else -band


def anchored_distribution(credit: float) -> dict[str, float]:
    """The distribution over the two anchors around `credit` whose expected credit is exactly `credit`.

    Rule-based scores have no model probabilities; saving them this way lets every consumer read
    one kind of distribution.
    """
    return dict(_anchored_shares(credit))


@lru_cache(maxsize=4096)
def anchored_expected_credit(credit: float) -> float | None:
    """`expected_credit(anchored_distribution(credit))`, remembered: rule scores repeat a few credits."""
    return expected_credit(anchored_distribution(credit))


@lru_cache(maxsize=4096)
def _anchored_shares(credit: float) -> tuple[tuple[str, float], ...]:
    credit = min(1.0, max(-1.0, credit))
    labels = list(ANCHORS)
    for lower, upper in zip(labels, labels[1:], strict=False):
        low, high = ANCHORS[lower], ANCHORS[upper]
        if low <= credit <= high:
            upper_share = round((credit - low) / (high - low), 10)
            shares = ((lower, 1 - upper_share), (upper, upper_share))
            return tuple((label, share) for label, share in shares if share > 0)
    raise AssertionError("credit is clamped to the anchors' range")
