"""Limits of imports and traces: each names the trace and the field, or refuses the request as too large."""

from dataclasses import replace

import pytest

from stash_common.errors import InvalidArgument, ResourceExhausted
from stash_ingest.limits import DEFAULT_LIMITS, check_traces
from stash_ingest.traces import Span, Step, Trace

SMALL = replace(
    DEFAULT_LIMITS,
    traces_per_import=2,
    steps_per_trace=3,
    spans_per_trace=1,
    string_chars=10,
    tool_input_bytes=20,
    json_bytes=30,
    trace_bytes=40,
)
USER = Step("user", "hello")


def _check(trace: Trace) -> None:
    check_traces([("trace 1", trace)], SMALL)


@pytest.mark.parametrize(
    ("trace", "message"),
    [
        (Trace(steps=(USER,) * 4), "trace 1: steps: 4 steps exceed the limit of 3 per trace"),
        (Trace(steps=(Step("user", "x" * 11),)), "trace 1: steps[0].content: has 11 characters; the limit is 10"),
        (Trace(steps=(USER,), title="t" * 11), "trace 1: title: has 11 characters"),
        (Trace(steps=(Step("assistant", "", "t", {"q": "x" * 20}),)), "trace 1: steps[0].tool_input: is 28 bytes"),
        (Trace(steps=(Step("user", "", metadata={"m": "x" * 30}),)), "trace 1: steps[0].metadata: is 38 bytes"),
        (Trace(steps=(USER,), spans=(Span("a", "x", 1, 2), Span("b", "y", 1, 2))), "trace 1: spans: 2 spans"),
        (Trace(steps=(USER,), spans=(Span("a", "x", 1, 2, output="o" * 30),)), "trace 1: spans[0].output: is 32"),
    ],
)
def test_a_trace_over_a_limit_is_refused_naming_the_field(trace: Trace, message: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        _check(trace)

    assert str(caught.value).startswith(message)


def test_a_trace_at_every_limit_is_accepted() -> None:
    step = Step("assistant", "x" * 5, "t", {"q": "x" * 10})
    _check(Trace(steps=(step, USER), spans=(Span("a", "x", 1, 2),)))


def test_a_trace_over_its_total_size_is_refused_though_each_field_is_within_its_limit() -> None:
    # Each step: 10 characters of content and `{}` of metadata; the trace's metadata `{}`: 2 + 3 × 12 = 38.
    at_limit = Trace(steps=(Step("user", "x" * 10),) * 3, title="tt")
    _check(at_limit)

    with pytest.raises(InvalidArgument, match="^trace 1: holds 41 bytes of text and JSON; a trace may hold at most 40"):
        _check(replace(at_limit, title="ttt"))


def test_too_many_traces_in_one_import_is_resource_exhausted() -> None:
    with pytest.raises(ResourceExhausted, match="holds 3 traces; one import may hold at most 2"):
        check_traces([(f"trace {n}", Trace(steps=(USER,))) for n in range(3)], SMALL)
