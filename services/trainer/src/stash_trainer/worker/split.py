"""The seeded held-out split by trace: neighbouring actions of one trace never straddle train and eval."""

from __future__ import annotations

import random
from collections.abc import Sequence
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
    random.Random(seed).shuffle(traces)
    held_out = set(traces[: min(len(traces) - 1, max(1, round(len(traces) * eval_fraction)))])
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
