"""Cutting traces into chunks, and the fingerprints that let unchanged chunks keep their labels."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from stash_common.steps import TraceStep
from stash_labeler.chunks import Chunk, cut_chunks
from stash_labeler.traces import LabelerTrace


def _trace(*steps: TraceStep) -> LabelerTrace:
    numbered = tuple(replace(step, id=f"s{index}", index=index) for index, step in enumerate(steps))
    return LabelerTrace("trace-1", "owner-1", 1, "stash", numbered)


def _step(role: str, content: str = "", **fields: Any) -> TraceStep:
    return TraceStep("", 0, role, content, **fields)  # type: ignore[arg-type]


def _call(tool: str, args: dict[str, Any], call_id: str | None = None) -> TraceStep:
    return _step("assistant", tool_name=tool, tool_input=args, tool_call_id=call_id)


def _result(content: str, tool: str | None = None, call_id: str | None = None, **metadata: Any) -> TraceStep:
    return _step("tool", content, tool_name=tool, tool_call_id=call_id, metadata=metadata)


def _shape(chunks: list[Chunk]) -> list[tuple[str, str, list[str]]]:
    return [(chunk.chunk_id, chunk.kind, [step.id for step in chunk.steps]) for chunk in chunks]


REFUND = (
    _step("system", "You are a support agent."),
    _step("user", "I want a refund for order 1182"),
    _call("lookup_order", {"order_id": "1182"}, "call_1"),
    _result('{"status": "delivered"}', "lookup_order", "call_1"),
    _step("assistant", "Your order was delivered on Monday."),
)


def test_refund_trace_cuts_into_user_call_and_message_chunks() -> None:
    chunks = cut_chunks(_trace(*REFUND))

    assert _shape(chunks) == [
        ("c0", "user", ["s1"]),
        ("c1", "tool_call", ["s2", "s3"]),
        ("c2", "agent_message", ["s4"]),
    ]
    assert [chunk.actor for chunk in chunks] == ["user", "agent", "agent"]
    assert chunks[1].action.id == "s2"
    assert chunks[1].result is not None and chunks[1].result.id == "s3"
    assert chunks[2].result is None


def test_system_steps_are_never_chunks() -> None:
    trace = _trace(
        _step("system", "rules"), _step("user", "hi"), _step("system", "more rules"), _step("assistant", "hello")
    )

    assert _shape(cut_chunks(trace)) == [("c0", "user", ["s1"]), ("c1", "agent_message", ["s3"])]


def test_result_joins_its_call_by_tool_call_id() -> None:
    trace = _trace(
        _call("lookup_order", {"order_id": "1"}, "a"),
        _call("lookup_order", {"order_id": "2"}, "b"),
        _result("two", "lookup_order", "b"),
        _result("one", "lookup_order", "a"),
    )

    assert _shape(cut_chunks(trace)) == [("c0", "tool_call", ["s0", "s3"]), ("c1", "tool_call", ["s1", "s2"])]


def test_result_without_id_joins_the_waiting_call_of_its_tool() -> None:
    trace = _trace(
        _call("lookup_order", {"order_id": "1"}),
        _call("read_policy", {}),
        _result("refunds within 30 days", "read_policy"),
        _result("delivered", "lookup_order"),
    )

    assert _shape(cut_chunks(trace)) == [("c0", "tool_call", ["s0", "s3"]), ("c1", "tool_call", ["s1", "s2"])]


def test_results_without_ids_join_calls_one_after_another() -> None:
    trace = _trace(
        _call("bash", {"command": "ls"}),
        _result("a.txt", "bash"),
        _call("bash", {"command": "cat a.txt"}),
        _result("hello", "bash"),
    )

    assert _shape(cut_chunks(trace)) == [("c0", "tool_call", ["s0", "s1"]), ("c1", "tool_call", ["s2", "s3"])]


def test_orphan_result_stands_alone() -> None:
    trace = _trace(_step("user", "go"), _result("done", "deploy", "missing"), _step("assistant", "Deployed."))
    chunks = cut_chunks(trace)

    assert _shape(chunks) == [("c0", "user", ["s0"]), ("c1", "tool_call", ["s1"]), ("c2", "agent_message", ["s2"])]
    assert chunks[1].actor == "agent"
    assert chunks[1].result is None


def test_result_with_id_does_not_join_a_call_of_another_id() -> None:
    trace = _trace(_call("lookup_order", {}, "a"), _result("x", "lookup_order", "b"))

    assert _shape(cut_chunks(trace)) == [("c0", "tool_call", ["s0"]), ("c1", "tool_call", ["s1"])]


def test_second_result_for_the_same_call_stands_alone() -> None:
    trace = _trace(_call("lookup_order", {}, "a"), _result("x", "lookup_order", "a"), _result("y", "lookup_order", "a"))

    assert _shape(cut_chunks(trace)) == [("c0", "tool_call", ["s0", "s1"]), ("c1", "tool_call", ["s2"])]


def test_growing_trace_keeps_earlier_ids_and_fingerprints() -> None:
    before = cut_chunks(_trace(*REFUND))
    after = cut_chunks(
        _trace(*REFUND, _step("user", "Thanks! Also refund order 1190"), _call("refund_order", {"id": "1190"}, "c2"))
    )

    assert [(c.chunk_id, c.fingerprint) for c in after[:3]] == [(c.chunk_id, c.fingerprint) for c in before]
    assert [c.chunk_id for c in after] == ["c0", "c1", "c2", "c3", "c4"]


def test_fingerprint_is_stable_for_equal_content() -> None:
    assert cut_chunks(_trace(*REFUND))[1].fingerprint == cut_chunks(_trace(*REFUND))[1].fingerprint
    assert len(cut_chunks(_trace(*REFUND))[1].fingerprint) == 32


def _call_fingerprint(call: TraceStep, result: TraceStep) -> str:
    (chunk,) = cut_chunks(_trace(call, result))
    return chunk.fingerprint


def test_fingerprint_changes_with_content_input_and_error_flags() -> None:
    call, result = _call("run", {"cmd": "make"}, "x"), _result("ok", "run", "x")
    base = _call_fingerprint(call, result)
    variants = [
        _call_fingerprint(call, replace(result, content="ok!")),
        _call_fingerprint(replace(call, tool_input={"cmd": "make test"}), result),
        _call_fingerprint(call, replace(result, metadata={"is_error": True})),
        _call_fingerprint(call, replace(result, metadata={"exit_code": 2})),
        _call_fingerprint(replace(call, tool_name="run2"), replace(result, tool_name="run2")),
    ]

    assert len({base, *variants}) == 1 + len(variants)


def test_fingerprint_ignores_metadata_a_label_does_not_read() -> None:
    call, result = _call("run", {"cmd": "make"}, "x"), _result("ok", "run", "x")
    stamped = replace(result, metadata={"timestamp": "2026-09-29T03:12:00Z"})

    assert _call_fingerprint(call, stamped) == _call_fingerprint(call, result)


def test_fingerprint_of_a_message_changes_with_its_content() -> None:
    (first,) = cut_chunks(_trace(_step("assistant", "Done.")))
    (second,) = cut_chunks(_trace(_step("assistant", "Done!")))

    assert first.fingerprint != second.fingerprint


def test_late_result_joins_its_call_and_changes_its_fingerprint() -> None:
    call = _call("refund_order", {"order_id": "1182"}, "call_9")
    waiting = cut_chunks(_trace(_step("user", "refund it"), call, _step("assistant", "Working on it.")))
    arrived = cut_chunks(
        _trace(_step("user", "refund it"), call, _step("assistant", "Working on it."), _result("{}", None, "call_9"))
    )

    assert _shape(arrived) == [
        ("c0", "user", ["s0"]),
        ("c1", "tool_call", ["s1", "s3"]),
        ("c2", "agent_message", ["s2"]),
    ]
    assert arrived[1].fingerprint != waiting[1].fingerprint
    assert [arrived[i].fingerprint for i in (0, 2)] == [waiting[i].fingerprint for i in (0, 2)]


def test_char_count_adds_content_and_tool_input() -> None:
    (chunk,) = cut_chunks(_trace(_call("f", {"a": 1}, "x"), _result("four", "f", "x")))

    assert chunk.char_count == len('{"a":1}') + len("{}") + len("four")
