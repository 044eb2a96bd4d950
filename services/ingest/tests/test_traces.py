"""Validation of canonical traces: every rule names the trace and the field."""

from typing import Any

import pytest

from stash_common.errors import InvalidArgument
from stash_ingest.traces import MAX_JSON_DEPTH, Span, Step, Trace, check_source_id, validate_trace

USER = Step("user", "hello")


def _spans(*spans: Span) -> Trace:
    return Trace(steps=(USER,), spans=spans)


def _nested(levels: int) -> dict[str, Any]:
    """An object `levels` deep: {"a": {"a": … {}}}."""
    value: dict[str, Any] = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


@pytest.mark.parametrize(
    ("trace", "message"),
    [
        (Trace(steps=()), "steps: a trace needs at least one step"),
        (Trace(steps=(Step("system", "rules"),)), "only system steps"),
        (Trace(steps=(Step("robot", "beep"),)), "steps[0].role: must be one of"),
        (Trace(steps=(Step("user", "a\x00b"),)), "steps[0].content: contains U+0000"),
        (Trace(steps=(USER,), title="t\x00"), "title: contains U+0000"),
        (
            Trace(steps=(Step("assistant", "", "t", {"q": ["a", "b\x00"]}),)),
            "steps[0].tool_input.q[1]: contains U+0000",
        ),
        (Trace(steps=(Step("assistant", "", "t", {"k\x00": 1}),)), "steps[0].tool_input (key 'k\\x00'): contains"),
        (Trace(steps=(Step("user", "hi", metadata={"m": "\x00"}),)), "steps[0].metadata.m: contains U+0000"),
        # Each field that the plain-value fast path of validate_step reads, refused and named by the checks.
        (Trace(steps=(Step("assistant", "", "t\x00"),)), "steps[0].tool_name: contains U+0000"),
        (Trace(steps=(Step("assistant", "", "t", {}, "c\x00"),)), "steps[0].tool_call_id: contains U+0000"),
        (Trace(steps=(Step("assistant", "", 7),)), "steps[0].tool_name: must be a string"),
        (Trace(steps=(Step("user", None),)), "steps[0].content: must be a string"),
        (Trace(steps=(Step("assistant", "", "t", ["q"]),)), "steps[0].tool_input: must be an object"),
        (Trace(steps=(Step("user", "hi", metadata=[]),)), "steps[0].metadata: must be an object"),
        (Trace(steps=(Step("user", "hi", metadata=_nested(21)),)), "steps[0].metadata" + ".a" * 20 + ": nests deeper"),
        (Trace(steps=(USER,), metadata={"source_id": "a\x00"}), "metadata.source_id: contains U+0000"),
        (_spans(Span("a", "x", 1, 2, input={"i": "\x00"})), "spans[0].input.i: contains U+0000"),
        (_spans(Span("a\x00", "x", 1, 2)), "spans[0].id: contains U+0000"),
        (Trace(steps=(Step("assistant", "", "t", _nested(21)),)), "steps[0].tool_input" + ".a" * 20 + ": nests deeper"),
        (Trace(steps=(USER,), external_id=""), "id: must be 1 to 500 characters"),
        (_spans(Span("a", "x", 1, 2), Span("a", "y", 1, 2)), "spans[1].id: duplicate span id 'a'"),
        (_spans(Span("a", "x", 5, 4)), "spans[0].end_ns: must not precede start_ns"),
        (_spans(Span("a", "x", 0, 2**63)), "spans[0].end_ns: must be 0 to 2**63-1"),
        (_spans(Span("a", "x", 1, 2, step_indices=(1,))), "spans[0].step_indices: step 1 does not exist"),
        (_spans(Span("a", "x", 1, 2, parent_id="b"), Span("b", "y", 1, 2, parent_id="a")), "is its own ancestor"),
    ],
)
def test_validate_trace_names_the_field_at_fault(trace: Trace, message: str) -> None:
    with pytest.raises(InvalidArgument, match="^trace 7: ") as caught:
        validate_trace(trace, "trace 7")

    assert message in str(caught.value)


def test_absent_parent_span_is_allowed() -> None:
    validate_trace(_spans(Span("a", "x", 1, 2, parent_id="not-exported")), "trace 1")


def test_json_nested_to_the_depth_limit_is_valid() -> None:
    validate_trace(Trace(steps=(Step("assistant", "", "t", _nested(MAX_JSON_DEPTH)),)), "trace 1")


def test_validate_source_id_refuses_nul_and_bad_lengths() -> None:
    with pytest.raises(InvalidArgument, match="^source_id: contains U\\+0000"):
        check_source_id("src\x00", 200)
    with pytest.raises(InvalidArgument, match="^source_id: must be 1 to 200"):
        check_source_id("", 200)
