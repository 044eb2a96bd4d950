"""A candidate's benchmark report and the release gate: plain functions of scores and the policy.

Rules:

- On each frozen benchmark version a comparison is right when the candidate scores its better action above
  its worse one (a tie is wrong). Accuracy comes with its 95 % Wilson score interval, overall and per slice
  (action type, source format, owner).
- The gate compares the candidate with the current release on the benchmark versions both were evaluated on:
  on the primary benchmark (the policy's, else the first name; its newest common version) the candidate's
  accuracy must be at least the release's plus the margin, and on every common version no slice may be worse
  than the release's by more than the tolerance.
- Without a release the candidate is compared with "no evaluator": it passes when it was evaluated on at
  least one benchmark of reviewed comparisons (a first release needs reviewed data).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Z_95 = 1.959964
SLICE_KEYS = {"action_type": "action_type", "source_format": "source_format", "owner": "owner_id"}


@dataclass(frozen=True)
class Decision:
    """Whether the candidate passed, against which release (None: no evaluator), and every reason it did not."""

    passed: bool
    compared_with: int | None
    reasons: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """The decision as stored and shown."""
        return {"passed": self.passed, "compared_with": self.compared_with, "reasons": list(self.reasons)}


def wilson(correct: int, n: int) -> tuple[float, float]:
    """The 95 % Wilson score interval of `correct` out of `n` (0..1 when n is 0)."""
    if n == 0:
        return 0.0, 1.0
    p = correct / n
    denominator = 1 + Z_95**2 / n
    centre = (p + Z_95**2 / (2 * n)) / denominator
    half = Z_95 * math.sqrt(p * (1 - p) / n + Z_95**2 / (4 * n * n)) / denominator
    low = 0.0 if correct == 0 else max(0.0, centre - half)
    high = 1.0 if correct == n else min(1.0, centre + half)  # exact at the ends, where rounding would miss
    return low, high


def accuracy(correct: int, n: int) -> dict[str, Any]:
    """`{n, correct, accuracy, low, high}`; accuracy is None without items."""
    low, high = wilson(correct, n)
    return {"n": n, "correct": correct, "accuracy": correct / n if n else None, "low": low, "high": high}


def benchmark_report(benchmark: Mapping[str, Any], scores: Mapping[tuple[str, str], float]) -> dict[str, Any]:
    """The report of one benchmark version (`id`, `name`, `version`, `items`) from the candidate's scores, keyed
    by (comparison id, "better" | "worse"); an item left unscored is wrong."""
    outcomes = [(item, _right(item["comparison_id"], scores)) for item in benchmark["items"]]
    slices = {
        dimension: {
            value: accuracy(sum(right for item, right in outcomes if item[key] == value), size)
            for value, size in sorted(_sizes(outcomes, key).items())
        }
        for dimension, key in SLICE_KEYS.items()
    }
    return {
        "benchmark_id": benchmark["id"],
        "name": benchmark["name"],
        "version": benchmark["version"],
        **accuracy(sum(right for _, right in outcomes), len(outcomes)),
        "slices": slices,
    }


def decide(
    report: Sequence[Mapping[str, Any]],
    release: tuple[int, Sequence[Mapping[str, Any]]] | None,
    primary: str | None,
    margin: float,
    tolerance: float,
) -> Decision:
    """The gate's decision on a candidate's report against the current release (number, report), or none."""
    if release is None:
        if not report:
            return Decision(False, None, ("no benchmark was evaluated: freeze one from reviewed comparisons",))
        return Decision(True, None, ())
    number, released = release
    theirs = {entry["benchmark_id"]: entry for entry in released}
    common = [entry for entry in report if entry["benchmark_id"] in theirs]
    name = primary or min((entry["name"] for entry in report), default=None)
    on_primary = [entry for entry in common if entry["name"] == name]
    if not on_primary:
        reason = f"release {number} and this candidate share no version of the primary benchmark {name}"
        return Decision(False, number, (reason,))
    reasons = []
    head = max(on_primary, key=lambda entry: entry["version"])
    mine, before = head["accuracy"] or 0.0, theirs[head["benchmark_id"]]["accuracy"] or 0.0
    if mine < before + margin:
        reasons.append(
            f"on {_label(head)} accuracy {mine:.3f} is not at least release {number}'s {before:.3f} "
            f"plus the margin {margin:g}"
        )
    for entry in common:
        reasons.extend(_worse_slices(entry, theirs[entry["benchmark_id"]], number, tolerance))
    return Decision(not reasons, number, tuple(reasons))


def primary_accuracy(report: Sequence[Mapping[str, Any]], primary: str | None) -> Mapping[str, Any] | None:
    """The report's entry for the newest version of the primary benchmark."""
    name = primary or min((entry["name"] for entry in report), default=None)
    named = [entry for entry in report if entry["name"] == name]
    return max(named, key=lambda entry: entry["version"]) if named else None


def _worse_slices(mine: Mapping[str, Any], theirs: Mapping[str, Any], number: int, tolerance: float) -> list[str]:
    reasons = []
    for dimension, values in mine["slices"].items():
        for value, entry in values.items():
            before = theirs["slices"].get(dimension, {}).get(value)
            if before is None or entry["accuracy"] is None or before["accuracy"] is None:
                continue
            if entry["accuracy"] < before["accuracy"] - tolerance:
                reasons.append(
                    f"on {_label(mine)} slice {dimension}={value} accuracy {entry['accuracy']:.3f} is worse than "
                    f"release {number}'s {before['accuracy']:.3f} by more than the tolerance {tolerance:g}"
                )
    return reasons


def _right(comparison_id: str, scores: Mapping[tuple[str, str], float]) -> bool:
    better, worse = scores.get((comparison_id, "better")), scores.get((comparison_id, "worse"))
    return better is not None and worse is not None and better > worse


def _sizes(outcomes: Sequence[tuple[Mapping[str, Any], bool]], key: str) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for item, _ in outcomes:
        sizes[item[key]] = sizes.get(item[key], 0) + 1
    return sizes


def _label(entry: Mapping[str, Any]) -> str:
    return f"{entry['name']} v{entry['version']}"
