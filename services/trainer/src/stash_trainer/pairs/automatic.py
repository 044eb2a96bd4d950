"""Preference pairs from the labeler's automatic action credit (spec: Automatic action credit).

Used only when the model's `training_config` is `{"input_version": 3, "annotation_source": "automatic"}`,
the configuration the UI submits. Rules:

- Within each trace, two actions pair when their expected credits (-1..+1, probability weighted)
  differ by at least `CREDIT_MARGIN`; the higher-credit action is chosen.
- Unscored actions (no expected credit, e.g. an `insufficient_evidence` verdict) never pair.
- Explicit human ratings take precedence: an action with a usable human rating is left out.
- Each pair records `chosen_credit`, `rejected_credit` and `credit_method: probability_weighted_v1`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from stash_common.errors import InvalidArgument
from stash_common.steps import TraceStep
from stash_trainer.pairs.explicit import human_rated_step_ids
from stash_trainer.pairs.inputs import SourceTrace
from stash_trainer.pairs.preference import PreferencePair, action_pair

# Credits closer than this are too alike to say which action is better.
CREDIT_MARGIN = 0.25
CREDIT_METHOD = "probability_weighted_v1"
SOURCE = "automatic"
SUPPORTED_CONFIG = '{"input_version": 3, "annotation_source": "automatic"}'
# Credits are probability-weighted sums; without this slack 0.35 - 0.1 would fall short of 0.25.
_FLOAT_SLACK = 1e-9


class TrainingConfig(BaseModel):
    """A personal model's `training_config`: action input version 3 trained from automatic annotations."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    input_version: Literal[3]
    annotation_source: Literal["automatic"]


def parse_training_config(raw: Mapping[str, Any] | None) -> TrainingConfig | None:
    """The validated configuration, or None for a legacy model without one; other shapes are rejected."""
    if raw is None:
        return None
    try:
        return TrainingConfig.model_validate(raw)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(["training_config", *map(str, first["loc"])])
        raise InvalidArgument(field, f"{first['msg']}; the supported configuration is {SUPPORTED_CONFIG}") from None


def automatic_pairs(traces: Sequence[SourceTrace], margin: float = CREDIT_MARGIN) -> list[PreferencePair]:
    """Pairs of scored, human-unrated actions within each trace whose credits differ by at least `margin`."""
    return [pair for trace in traces for pair in _trace_pairs(trace, margin)]


def _trace_pairs(trace: SourceTrace, margin: float) -> list[PreferencePair]:
    scored = _scored_actions(trace)
    pairs = []
    for (first, first_credit), (second, second_credit) in combinations(scored, 2):
        if abs(first_credit - second_credit) + _FLOAT_SLACK < margin:
            continue
        if first_credit > second_credit:
            pairs.append(_pair(trace, (first, first_credit), (second, second_credit)))
        else:
            pairs.append(_pair(trace, (second, second_credit), (first, first_credit)))
    return pairs


def _scored_actions(trace: SourceTrace) -> list[tuple[TraceStep, float]]:
    credits = {credit.step_id: credit.expected_credit for credit in trace.credits}
    rated = human_rated_step_ids(trace)
    candidates = (step for step in trace.steps if step.is_action and step.id not in rated)
    return [(step, credit) for step in candidates if (credit := credits.get(step.id)) is not None]


def _pair(trace: SourceTrace, chosen: tuple[TraceStep, float], rejected: tuple[TraceStep, float]) -> PreferencePair:
    (good, good_credit), (bad, bad_credit) = chosen, rejected
    evidence = {
        "source": SOURCE,
        "chosen_step_id": good.id,
        "rejected_step_id": bad.id,
        "chosen_credit": good_credit,
        "rejected_credit": bad_credit,
        "credit_method": CREDIT_METHOD,
    }
    return action_pair((trace, good), (trace, bad), evidence)
