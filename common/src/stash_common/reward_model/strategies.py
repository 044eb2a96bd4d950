"""How a loaded reward model scores the actions of many traces: three strategies, one registry.

- `one_by_one`: one forward call per action; the reference every other strategy must equal.
- `sorted_batches`: every action of every trace, length-sorted into batches with dynamic padding;
  works for any model and is what encoders (MiniLM) use.
- `one_pass`: for causal decoders, every action of a trace from ONE forward pass over the trace's
  last example, reading the score head at each action's last token (`passes.py` says when that
  equals scoring the action alone: segment-wise tokenisation makes every action whose example fits
  the token limit a prefix of the pass); the actions it cannot cover (their example is longer than
  the limit, so it is left-truncated) are scored as `sorted_batches` does. Passes of several traces
  share a batch: right padding changes no earlier position of a causal model.

Each strategy takes the traces' action examples (each trace's in step order) and returns their
rewards in the same shape; none of them knows about jobs or files.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from stash_common.reward_model.inference import (
    autocast,
    collate,
    is_causal_decoder,
    score_texts,
    sorted_batches,
    tokenize,
)
from stash_common.reward_model.passes import TracePass, plan_pass


@dataclass(frozen=True)
class ScoringModel:
    """A loaded checkpoint ready to score: the model, its tokenizer, the device, token limit and batch size,
    and whether the limit is input version 3's sectioned window (`window.py`) rather than left truncation."""

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    device: str
    max_length: int
    batch_size: int
    sectioned: bool = False

    def score_texts(self, texts: Sequence[str], batch_size: int | None = None) -> list[float]:
        """The reward of each text, fitted to the token limit, in length-sorted batches (`batch_size` overrides)."""
        size = batch_size or self.batch_size
        return score_texts(self.model, self.tokenizer, texts, self.max_length, self.device, size, self.sectioned)


ActionScorer = Callable[[ScoringModel, Sequence[Sequence[str]]], list[list[float]]]


def regroup(flat: Sequence[float], traces: Sequence[Sequence[str]]) -> list[list[float]]:
    """Cut `flat` back into one list per trace."""
    groups, start = [], 0
    for examples in traces:
        groups.append(list(flat[start : start + len(examples)]))
        start += len(examples)
    return groups


def score_one_by_one(scoring: ScoringModel, traces: Sequence[Sequence[str]]) -> list[list[float]]:
    """Strategy (a): one forward call per action, no padding at all."""
    return regroup(scoring.score_texts([text for examples in traces for text in examples], batch_size=1), traces)


def score_sorted_batches(scoring: ScoringModel, traces: Sequence[Sequence[str]]) -> list[list[float]]:
    """Strategy (b): all actions in length-sorted batches with dynamic padding."""
    return regroup(scoring.score_texts([text for examples in traces for text in examples]), traces)


def score_in_one_pass(scoring: ScoringModel, traces: Sequence[Sequence[str]]) -> list[list[float]]:
    """Strategy (c): one forward pass per trace for the actions it covers, windows for the rest."""
    if not is_causal_decoder(scoring.model):
        raise ValueError(f"one-pass scoring needs a causal decoder, not {type(scoring.model).__name__}")
    plans = [plan_pass(tokenize(scoring.tokenizer, examples, None), scoring.max_length) for examples in traces]
    scores = [[math.nan] * len(examples) for examples in traces]
    score_passes(scoring, plans, scores)
    windows = [(trace, number) for trace, plan in enumerate(plans) for number in plan.windows]
    for (trace, number), score in zip(windows, scoring.score_texts([traces[t][n] for t, n in windows]), strict=True):
        scores[trace][number] = score
    return scores


def score_passes(scoring: ScoringModel, plans: Sequence[TracePass], scores: list[list[float]]) -> None:
    """Run every plan's pass, length-sorted in batches, and fill in the scores of the actions it covers."""
    planned = [t for t, plan in enumerate(plans) if plan.tokens]
    for rows in sorted_batches([len(plans[t].tokens) for t in planned], scoring.batch_size, scoring.device):
        batch = [planned[row] for row in rows]
        per_position = position_rewards(scoring, [plans[t].tokens for t in batch])
        for row, trace in enumerate(batch):
            numbers, positions = zip(*plans[trace].positions.items(), strict=True)
            for number, score in zip(numbers, per_position[row, list(positions)].tolist(), strict=True):
                scores[trace][number] = score


def position_rewards(scoring: ScoringModel, sequences: Sequence[Sequence[int]]) -> torch.Tensor:
    """The fp32 score head at every position of each right-padded sequence: shape (rows, longest).

    No padding mask: no real position attends to the padding after it (see `inference`).
    """
    model = scoring.model
    ids, _ = collate(sequences, scoring.tokenizer.pad_token_id, scoring.device)
    base, head = model.get_submodule(model.base_model_prefix), model.get_submodule("score")
    model.train(False)
    with torch.inference_mode(), autocast(scoring.device):
        hidden = base(input_ids=ids, use_cache=False).last_hidden_state
        rewards: torch.Tensor = head(hidden).squeeze(-1).float()
        return rewards


STRATEGIES: Mapping[str, ActionScorer] = {
    "one_by_one": score_one_by_one,
    "sorted_batches": score_sorted_batches,
    "one_pass": score_in_one_pass,
}


def choose_strategy(model: PreTrainedModel) -> str:
    """The fastest exact strategy for `model`: one pass per trace for causal decoders, sorted batches otherwise."""
    return "one_pass" if is_causal_decoder(model) else "sorted_batches"


def strategy(name: str) -> ActionScorer:
    """The strategy registered as `name`; an unknown name raises an error listing the supported ones."""
    if name not in STRATEGIES:
        raise ValueError(f"unknown scoring strategy {name!r}: use one of {', '.join(STRATEGIES)}")
    return STRATEGIES[name]
