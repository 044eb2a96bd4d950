"""The held-out split: neighbouring actions of one trace never straddle train and eval.

Input versions 1 and 2 draw a seeded tenth of the traces per job. Input version 3 holds out whole task
groups, drawn once per model and stored with it (`job_contract.draw_eval_task_groups`); the job names the
held-out traces and `split_by_held_out_traces` keeps every pair of a held-out group on the eval side.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from stash_trainer.worker.pairs import Pair

EVAL_TRACE_FRACTION = 0.1


@dataclass(frozen=True)
class TraceSplit:
    """Training and held-out pairs; `evaluated` is False when no independent split exists."""

    train: tuple[Pair, ...]
    eval: tuple[Pair, ...]
    excluded_cross_trace_pairs: int

    @property
    def evaluated(self) -> bool:
        """Whether a held-out set exists (otherwise every evaluation metric is null)."""
        return bool(self.eval)


def split_by_trace(pairs: Sequence[Pair], seed: int, eval_fraction: float = EVAL_TRACE_FRACTION) -> TraceSplit:
    """Hold out a seeded `eval_fraction` of the source traces (at least one, never all).

    A pair whose traces fall in both partitions is excluded and counted. When the split leaves
    either side without pairs, or there are fewer than two traces, every pair trains and there
    is no evaluation: the training set is never used to evaluate.
    """
    traces = sorted({trace_id for pair in pairs for trace_id in pair.trace_ids})
    if len(traces) < 2:
        return TraceSplit(tuple(pairs), (), 0)
    return split_by_held_out_traces(pairs, held_out_sample(traces, seed, eval_fraction))


def split_by_held_out_traces(pairs: Sequence[Pair], held_out: Collection[str]) -> TraceSplit:
    """Pairs wholly from `held_out` traces evaluate, the others train; pairs across both are counted out.

    When either side is left without pairs every pair trains and there is no evaluation.
    """
    held_out = set(held_out)
    train, held, crossing = [], [], 0
    for pair in pairs:
        inside = sum(trace_id in held_out for trace_id in set(pair.trace_ids))
        if inside == 0:
            train.append(pair)
        elif inside == len(set(pair.trace_ids)):
            held.append(pair)
        else:
            crossing += 1
    if not train or not held:
        return TraceSplit(tuple(pairs), (), 0)
    return TraceSplit(tuple(train), tuple(held), crossing)


def held_out_sample(names: list[str], seed: int | str, eval_fraction: float = EVAL_TRACE_FRACTION) -> set[str]:
    """A seeded `eval_fraction` of `names`, at least one and never all; the draw depends on their order."""
    shuffled = list(names)
    random.Random(seed).shuffle(shuffled)
    return set(shuffled[: min(len(shuffled) - 1, max(1, round(len(shuffled) * eval_fraction)))])
