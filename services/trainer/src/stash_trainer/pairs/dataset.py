"""The training dataset of a reward model: explicit, feedback and automatic pairs, deduplicated and capped.

Order is priority: explicit human ratings first, then feedback findings (when a provider is
configured), then automatic credit (when `training_config` asks for it). A pair whose chosen and
rejected texts are identical teaches nothing and is dropped; of identical pairs the first is kept.
Beyond `max_pairs`, whole tiers are kept in order and the tier that overflows is sampled with the
seed, keeping its order. Feedback extraction stops once explicit and feedback pairs reach `max_pairs`.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stash_common.errors import FailedPrecondition, InvalidArgument
from stash_trainer.pairs.automatic import (
    TrainingConfig,
    automatic_pairs,
    parse_training_config,
    sampled_action_ids,
)
from stash_trainer.pairs.explicit import explicit_pairs
from stash_trainer.pairs.feedback import CRITERIA, AssessmentScope, Extraction, FeedbackExtractor, Finding
from stash_trainer.pairs.inputs import SourceTrace
from stash_trainer.pairs.preference import PreferencePair

DEFAULT_MAX_PAIRS = 4000
MIN_PAIRS = 2
MIN_TRACES = 2


class NotEnoughPairs(FailedPrecondition):
    """The selected traces yield fewer than two preference pairs."""


class NotEnoughTraces(FailedPrecondition):
    """Every preference pair comes from one trace, so no trace can be held out for evaluation."""


@dataclass(frozen=True)
class PairSet:
    """The pairs to train on, the learning report (None when no feedback was extracted) and what was left out."""

    pairs: tuple[PreferencePair, ...]
    feedback: tuple[dict[str, Any], ...] | None
    excluded_identical: int
    excluded_duplicates: int
    excluded_over_max: int

    def to_jsonl(self) -> str:
        """`pairs.jsonl` of a job: `{chosen, rejected, trace_ids, granularity, action_type, ...evidence}` per line."""
        return _jsonl(pair.to_job_line() for pair in self.pairs)

    def to_export_jsonl(self) -> str:
        """`GET /export/pairs`: `{chosen, rejected, trace_ids, granularity, action_type}` per line."""
        return _jsonl(pair.to_export_line() for pair in self.pairs)


def build_pairs(
    traces: Sequence[SourceTrace],
    training_config: Mapping[str, Any] | None,
    max_pairs: int = DEFAULT_MAX_PAIRS,
    feedback_extractor: FeedbackExtractor | None = None,
    seed: int = 0,
) -> PairSet:
    """The dataset of the selected traces; it may be too small to train on (see `check_trainable`)."""
    if max_pairs < MIN_PAIRS:
        raise InvalidArgument("max_pairs", f"is {max_pairs}; training needs at least {MIN_PAIRS} pairs")
    config = parse_training_config(training_config)
    explicit = explicit_pairs(traces, sections=config is not None)
    extraction = None
    if feedback_extractor is not None:
        room = max(0, max_pairs - len(explicit))
        extraction = feedback_extractor.extract(traces, seed, max_pairs=room, scope=assessment_scope(config))
    automatic = automatic_pairs(traces, config=config) if config is not None else []
    tiers, identical, duplicates = dedupe_pairs([explicit, extraction.pairs if extraction else [], automatic])
    kept = cap_pairs(tiers, max_pairs, seed)
    over = sum(map(len, tiers)) - len(kept)
    return PairSet(tuple(kept), _report(extraction, kept), identical, duplicates, over)


def assessment_scope(config: TrainingConfig | None) -> AssessmentScope:
    """What AI preference generation assesses under `config`: its criteria and its sampled actions."""
    if config is None:
        return AssessmentScope()
    criteria = tuple(config.criteria) if config.criteria else CRITERIA
    return AssessmentScope(criteria, lambda trace: sampled_action_ids(trace, config), sections=True)


def dedupe_pairs(tiers: Sequence[Sequence[PreferencePair]]) -> tuple[list[list[PreferencePair]], int, int]:
    """The tiers without identical-sided pairs and later copies of a pair, with both counts."""
    seen: set[tuple[str, str]] = set()
    kept: list[list[PreferencePair]] = []
    identical = duplicates = 0
    for tier in tiers:
        kept.append([])
        for pair in tier:
            if pair.chosen == pair.rejected:
                identical += 1
            elif pair.key in seen:
                duplicates += 1
            else:
                seen.add(pair.key)
                kept[-1].append(pair)
    return kept, identical, duplicates


def cap_pairs(tiers: Sequence[Sequence[PreferencePair]], max_pairs: int, seed: int) -> list[PreferencePair]:
    """At most `max_pairs`: whole tiers in order, then a seeded, order-keeping sample of the tier that overflows."""
    kept: list[PreferencePair] = []
    for tier in tiers:
        room = max_pairs - len(kept)
        if len(tier) <= room:
            kept += tier
            continue
        kept += [tier[i] for i in sorted(random.Random(seed).sample(range(len(tier)), room))]
        break
    return kept


def check_trainable(pairs: Sequence[PreferencePair]) -> None:
    """Raise NotEnoughPairs or NotEnoughTraces, with what to do about it, when the pairs cannot train a model."""
    problem = trainability_problem(pairs)
    if problem is not None:
        raise problem


def trainability_problem(pairs: Sequence[PreferencePair]) -> FailedPrecondition | None:
    """The error `check_trainable` raises for these pairs, or None when they can train a model."""
    trace_ids = sorted({trace_id for pair in pairs for trace_id in pair.trace_ids})
    if not pairs:
        return NotEnoughPairs(
            "found no preference pairs in the selected traces; rate at least one action (+) and another (−), "
            "or select traces with user reactions"
        )
    if len(pairs) < MIN_PAIRS:
        return NotEnoughPairs(
            f"found 1 preference pair in {_count(len(trace_ids), 'trace')}; rate at least one more action (+/−) "
            "or select traces with user reactions"
        )
    if len(trace_ids) < MIN_TRACES:
        return NotEnoughTraces(
            f"all {len(pairs)} preference pairs come from trace {trace_ids[0]}; at least two source traces are "
            "needed so evaluation can hold out whole traces: select another trace with rated actions or user reactions"
        )
    return None


def _report(extraction: Extraction | None, kept: Sequence[PreferencePair]) -> tuple[dict[str, Any], ...] | None:
    if extraction is None:
        return None
    problem, keys = trainability_problem(kept), {pair.key for pair in kept}
    return tuple(finding.report(pair_exclusion(finding, keys, problem)) for finding in extraction.findings)


def pair_exclusion(finding: Finding, kept_keys: set[tuple[str, str]], problem: FailedPrecondition | None) -> str | None:
    """Why a finding was not trained on, or None when its pair is in a dataset that met the minimum size."""
    pair = finding.pair
    if pair is None:
        return finding.pair_exclusion
    if pair.chosen == pair.rejected:
        return "the alternative renders the same text as the original"
    if pair.key not in kept_keys:
        return "left out of the dataset: it was capped at max_pairs"
    if problem is not None:
        return f"the dataset is too small to train on: {problem.message}"
    return None


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _jsonl(rows: Iterable[Mapping[str, Any]]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n" for row in rows)
