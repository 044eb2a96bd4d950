"""The seeded held-out split by trace, and the frozen one by task group (input version 3)."""

from stash_trainer.job_contract import draw_eval_task_groups
from stash_trainer.worker.pairs import Pair
from stash_trainer.worker.split import TraceSplit, split_by_held_out_traces, split_by_trace


def _pair(*trace_ids: str) -> Pair:
    return Pair("good", "bad", trace_ids)


def test_split_by_trace_holds_out_a_tenth_of_the_traces() -> None:
    pairs = [_pair(f"t{n // 3}") for n in range(60)]  # 20 traces, 3 pairs each

    split = split_by_trace(pairs, seed=7)

    eval_traces = {t for pair in split.eval for t in pair.trace_ids}
    train_traces = {t for pair in split.train for t in pair.trace_ids}
    assert len(eval_traces) == 2
    assert not eval_traces & train_traces
    assert (len(split.train), len(split.eval), split.excluded_cross_trace_pairs) == (54, 6, 0)
    assert split.evaluated


def test_split_by_trace_repeats_with_the_seed() -> None:
    pairs = [_pair(f"t{n}") for n in range(40)]

    assert split_by_trace(pairs, seed=1) == split_by_trace(pairs, seed=1)
    assert split_by_trace(pairs, seed=1).eval != split_by_trace(pairs, seed=2).eval


def test_split_by_trace_excludes_and_counts_pairs_across_the_partitions() -> None:
    pairs = [_pair(f"t{n}") for n in range(10)]
    held_out = split_by_trace(pairs, seed=0).eval[0].trace_ids[0]
    crossing = [_pair(held_out, "t-other"), _pair("t-other", held_out)]

    split = split_by_trace([*pairs, *crossing, _pair("t-other")], seed=0)

    assert split.excluded_cross_trace_pairs == 2
    assert not set(crossing) & set(split.train + split.eval)


def test_one_trace_trains_on_everything_without_evaluation() -> None:
    pairs = [_pair("only"), _pair("only"), _pair("only")]

    split = split_by_trace(pairs, seed=0)

    assert (split.train, split.eval, split.excluded_cross_trace_pairs) == (tuple(pairs), (), 0)
    assert not split.evaluated


def test_two_traces_hold_out_one() -> None:
    split = split_by_trace([_pair("a"), _pair("b"), _pair("b")], seed=0)

    assert len({pair.trace_ids for pair in split.eval}) == 1
    assert {pair.trace_ids for pair in split.train}.isdisjoint({pair.trace_ids for pair in split.eval})


def test_no_usable_split_when_held_out_traces_have_only_crossing_pairs() -> None:
    # Two traces: whichever is held out, its only pair also names the other trace.
    pairs = [_pair("a"), _pair("a", "b")]

    split = split_by_trace(pairs, seed=0)

    assert (split.train, split.eval, split.excluded_cross_trace_pairs) == (tuple(pairs), (), 0)


def test_draw_eval_task_groups_holds_out_a_seeded_tenth_at_least_one_never_all() -> None:
    groups = [f"g{n}" for n in range(20)]

    drawn = draw_eval_task_groups(groups, seed="7:model")

    assert len(drawn) == 2 and set(drawn) <= set(groups)
    assert drawn == draw_eval_task_groups(list(reversed(groups)), seed="7:model")
    assert draw_eval_task_groups(["a", "b"], seed=0) in (["a"], ["b"])
    assert draw_eval_task_groups(["only"], seed=0) == []


def test_split_by_held_out_traces_keeps_every_pair_of_the_held_out_traces_on_the_eval_side() -> None:
    pairs = [_pair(f"t{n % 6}") for n in range(18)]

    split = split_by_held_out_traces(pairs, ["t0", "t3"])

    assert {pair.trace_ids[0] for pair in split.eval} == {"t0", "t3"}
    assert (len(split.train), len(split.eval)) == (12, 6)
    assert split_by_held_out_traces(pairs, ["t-none"]) == TraceSplit(tuple(pairs), (), 0)
