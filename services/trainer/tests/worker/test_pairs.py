"""Pairs: action and tool-call flags, and the seeded cap to `max_pairs`."""

from stash_trainer.worker.pairs import Pair, cap_pairs


def _pairs(count: int) -> list[Pair]:
    return [Pair(f"good {n}", f"bad {n}", (f"t{n}",)) for n in range(count)]


def test_cap_pairs_keeps_everything_under_the_cap() -> None:
    pairs = _pairs(5)

    assert cap_pairs(pairs, 5, seed=1) == pairs


def test_cap_pairs_samples_in_input_order_and_repeats_with_the_seed() -> None:
    pairs = _pairs(50)

    capped = cap_pairs(pairs, 10, seed=3)

    assert len(capped) == 10
    assert capped == sorted(capped, key=pairs.index)
    assert cap_pairs(pairs, 10, seed=3) == capped
    assert cap_pairs(pairs, 10, seed=4) != capped


def test_tool_call_pairs_are_action_pairs() -> None:
    tool = Pair("a", "b", ("t",), "action", "tool_call")
    response = Pair("a", "b", ("t",), "action", "response")
    trace = Pair("a", "b", ("t",), "trace", "tool_call")

    assert (tool.is_action, tool.is_tool_call) == (True, True)
    assert (response.is_action, response.is_tool_call) == (True, False)
    assert (trace.is_action, trace.is_tool_call) == (False, False)
