"""Batches of similar length in random order: little padding, yet no run of same-length batches."""

from __future__ import annotations

import random
from collections.abc import Sequence

# Sorting the whole epoch by length minimises padding but feeds the model long runs of look-alike
# pairs (the same request kind renders to similar lengths), which cost held-out accuracy. Sorting
# within shuffled buckets of this many batches keeps most of the padding saving.
BUCKET_BATCHES = 16


def plan_batches(
    lengths: Sequence[int], batch_size: int, rng: random.Random, bucket_batches: int = BUCKET_BATCHES
) -> list[list[int]]:
    """Indices of `lengths` grouped into batches: shuffle, sort within buckets, cut, shuffle the batches."""
    order = list(range(len(lengths)))
    rng.shuffle(order)
    bucket = batch_size * bucket_batches
    batches: list[list[int]] = []
    for start in range(0, len(order), bucket):
        sorted_bucket = sorted(order[start : start + bucket], key=lengths.__getitem__)
        batches += [sorted_bucket[i : i + batch_size] for i in range(0, len(sorted_bucket), batch_size)]
    rng.shuffle(batches)
    return batches
