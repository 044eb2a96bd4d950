"""Length-bucketed batch planning."""

import random

from stash_trainer.worker.batches import plan_batches


def _padding(lengths: list[int], batches: list[list[int]]) -> int:
    return sum(len(batch) * max(lengths[i] for i in batch) - sum(lengths[i] for i in batch) for batch in batches)


def test_plan_batches_uses_every_index_once_in_full_batches() -> None:
    lengths = [random.Random(n).randint(5, 300) for n in range(203)]

    batches = plan_batches(lengths, 8, random.Random(0))

    assert sorted(i for batch in batches for i in batch) == list(range(203))
    assert sorted(map(len, batches))[1:] == [8] * (len(batches) - 1)


def test_plan_batches_pads_far_less_than_random_batches() -> None:
    lengths = [random.Random(n).randint(5, 300) for n in range(512)]
    order = list(range(512))
    random.Random(0).shuffle(order)

    planned = _padding(lengths, plan_batches(lengths, 8, random.Random(0)))

    assert planned * 4 < _padding(lengths, [order[i : i + 8] for i in range(0, 512, 8)])


def test_plan_batches_shuffles_batch_order_and_repeats_with_the_seed() -> None:
    lengths = list(range(400))

    batches = plan_batches(lengths, 8, random.Random(1))

    assert batches == plan_batches(lengths, 8, random.Random(1))
    firsts = [batch[0] for batch in batches]
    assert firsts != sorted(firsts)
