"""What a reward model's metrics can honestly say: one reading for REST, the CLI's demo and the web UI.

A held-out accuracy is only as good as the pairs behind it: 2 of 3 is "67 %" and means nothing. So every
accuracy comes with its sample count and a 95 % Wilson score interval, and below `MIN_EVAL_PAIRS` held-out
pairs it is "too few held-out pairs to measure" rather than a percentage. The Bradley–Terry loss of a
model that cannot tell chosen from rejected is ln 2 (σ(0) = ½), so the final loss is shown beside that
chance level, with a warning when training left it there.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

MIN_EVAL_PAIRS = 10  # fewer held-out pairs measure nothing: at 8 of 10 the interval already spans 0.49–0.94
CHANCE_LOSS = math.log(2)  # −log σ(0): the loss of a model that scores chosen and rejected alike
LOSS_MOVED_BY = 0.05  # a final loss within this of ln 2 means training did not move the model off chance
Z_95 = 1.959964  # the standard normal quantile of a two-sided 95 % interval
# (metric prefix, what one held-out sample is): overall, action and tool-call accuracy.
ACCURACIES = (("eval", "pair"), ("action_eval", "action pair"), ("tool_eval", "tool-call pair"))


def wilson_interval(correct: int, total: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of `correct` successes in `total` trials (total > 0), clipped to 0..1."""
    if total <= 0 or not 0 <= correct <= total:
        raise ValueError(f"need 0 <= correct <= total and total > 0, got {correct} of {total}")
    share = correct / total
    denominator = 1 + z * z / total
    centre = (share + z * z / (2 * total)) / denominator
    spread = z * math.sqrt(share * (1 - share) / total + z * z / (4 * total * total)) / denominator
    return max(0.0, centre - spread), min(1.0, centre + spread)


def accuracy_reading(accuracy: float | None, pairs: int | None, what: str) -> dict[str, Any]:
    """`{pairs, correct, accuracy, interval, measured, summary}` of one held-out accuracy over `pairs` samples.

    `measured` is False below MIN_EVAL_PAIRS; the counts and interval are still given, the summary says why
    no percentage is shown.
    """
    total = pairs or 0
    if accuracy is None or total == 0:
        return _reading(total, None, None, f"not measured: no held-out {what}s")
    correct = round(accuracy * total)
    low, high = wilson_interval(correct, total)
    if total < MIN_EVAL_PAIRS:
        summary = f"too few held-out pairs to measure ({_count(total, f'held-out {what}')}; at least {MIN_EVAL_PAIRS})"
        return _reading(total, correct, (low, high), summary)
    summary = (
        f"{_percent(correct / total)} of {_count(total, f'held-out {what}')} scored the right way round"
        f" (95 % interval {_percent(low)}–{_percent(high)})"
    )
    return {**_reading(total, correct, (low, high), summary), "measured": True}


def loss_reading(final_loss: float | None) -> dict[str, Any]:
    """`{final, chance, moved, warning, summary}`: the final training loss against chance (ln 2)."""
    if final_loss is None:
        return {"final": None, "chance": CHANCE_LOSS, "moved": None, "warning": None, "summary": "—"}
    moved = final_loss < CHANCE_LOSS - LOSS_MOVED_BY
    warning = (
        None
        if moved
        else f"training did not move the loss off chance (ln 2 = {CHANCE_LOSS:.3f}): the model scores chosen and"
        " rejected alike; train on more pairs or more epochs"
    )
    summary = f"{final_loss:.4f} (chance is ln 2 = {CHANCE_LOSS:.3f}; Bradley–Terry, lower is better)"
    return {"final": final_loss, "chance": CHANCE_LOSS, "moved": moved, "warning": warning, "summary": summary}


def model_quality(metrics: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The honest reading of a model's metrics (None without metrics): each accuracy and the loss.

    `{"min_eval_pairs", "eval", "action_eval", "tool_eval", "loss"}`, each accuracy as `accuracy_reading`.
    """
    if metrics is None:
        return None
    readings = {
        prefix: accuracy_reading(metrics.get(f"{prefix}_accuracy"), metrics.get(f"{prefix}_pairs"), what)
        for prefix, what in ACCURACIES
    }
    return {"min_eval_pairs": MIN_EVAL_PAIRS, **readings, "loss": loss_reading(metrics.get("final_loss"))}


def _reading(pairs: int, correct: int | None, interval: tuple[float, float] | None, summary: str) -> dict[str, Any]:
    return {
        "pairs": pairs,
        "correct": correct,
        "accuracy": None if correct is None else correct / pairs,
        "interval": None if interval is None else list(interval),
        "measured": False,
        "summary": summary,
    }


def _percent(share: float) -> str:
    return f"{share * 100:.0f} %"


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"
