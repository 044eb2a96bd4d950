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

import random
import secrets
from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from stash_common.errors import InvalidArgument
from stash_common.steps import TraceStep
from stash_trainer.pairs.explicit import human_rated_step_ids
from stash_trainer.pairs.inputs import SourceTrace
from stash_trainer.pairs.preference import PreferencePair, action_pair

# Credits closer than this are too alike to say which action is better.
CREDIT_MARGIN = 0.25
CREDIT_METHOD = "probability_weighted_v1"
SOURCE = "automatic"
SUPPORTED_CONFIG = (
    '{"input_version": 3, "annotation_source": "automatic"}, optionally with "criteria" (1 to 8 texts),'
    ' "max_actions_per_trace" (1 to 10000) and "action_sample_seed"'
)
MAX_CRITERIA = 8
SEED_LIMIT = 2**31
# Credits are probability-weighted sums; without this slack 0.35 - 0.1 would fall short of 0.25.
_FLOAT_SLACK = 1e-9

Criterion = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]


class TrainingConfig(BaseModel):
    """A personal model's `training_config`: action input version 3 trained from automatic annotations.

    `criteria` replace the four default criteria of AI preference generation; `max_actions_per_trace`
    samples at most that many actions of each trace for supervision, with `action_sample_seed`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    input_version: Literal[3]
    annotation_source: Literal["automatic"]
    criteria: list[Criterion] | None = Field(None, min_length=1, max_length=MAX_CRITERIA)
    # Not strict: a protobuf Struct carries every number as a float (3.0).
    max_actions_per_trace: int | None = Field(None, ge=1, le=10_000, strict=False)
    action_sample_seed: int | None = Field(None, ge=0, lt=SEED_LIMIT, strict=False)


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


def recorded_training_config(raw: Mapping[str, Any] | None) -> dict[str, Any]:
    """The configuration as the model records it: validated, and with a drawn `action_sample_seed` when
    actions are sampled without one, so that a retry samples the same actions ({} without a configuration)."""
    config = parse_training_config(raw)
    if config is None:
        return {}
    if config.max_actions_per_trace is not None and config.action_sample_seed is None:
        config = config.model_copy(update={"action_sample_seed": secrets.randbelow(SEED_LIMIT)})
    return config.model_dump(exclude_none=True)


def sampled_action_ids(trace: SourceTrace, config: TrainingConfig | None) -> frozenset[str] | None:
    """The ids of the trace's actions supervision may use: a seeded sample of `max_actions_per_trace`, or
    None for all of them (no limit, or the trace has no more actions than the limit)."""
    limit = config.max_actions_per_trace if config is not None else None
    actions = [step.id for step in trace.steps if step.is_action]
    if limit is None or len(actions) <= limit:
        return None
    rng = random.Random(f"{config.action_sample_seed if config else 0}:{trace.id}")
    return frozenset(rng.sample(actions, limit))


def automatic_pairs(
    traces: Sequence[SourceTrace], margin: float = CREDIT_MARGIN, config: TrainingConfig | None = None
) -> list[PreferencePair]:
    """Pairs of scored, human-unrated actions within each trace whose credits differ by at least `margin`
    (among the sampled actions, when `config` limits them)."""
    return [pair for trace in traces for pair in _trace_pairs(trace, margin, sampled_action_ids(trace, config))]


def _trace_pairs(trace: SourceTrace, margin: float, allowed: frozenset[str] | None) -> list[PreferencePair]:
    scored = [(step, credit) for step, credit in _scored_actions(trace) if allowed is None or step.id in allowed]
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
    return action_pair((trace, good), (trace, bad), evidence, sections=True)
