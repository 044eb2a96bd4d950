"""What adapter tests share: small views of canonical traces, JSONL payloads, and the checks every format passes."""

import os
from collections.abc import Callable
from typing import Any

import orjson

from stash_common.errors import InvalidArgument
from stash_ingest.adapters.reading import first_value
from stash_ingest.traces import Trace, validate_trace
from support.fixtures import REAL_FIXTURES, real_fixture

Parse = Callable[[bytes], list[Trace]]
LooksLike = Callable[[Any], bool]


def roles(trace: Trace) -> list[str]:
    """The role of every step, in order."""
    return [step.role for step in trace.steps]


def called_tools(trace: Trace) -> list[str | None]:
    """The tools the assistant called, in order."""
    return [step.tool_name for step in trace.steps if step.role == "assistant" and step.tool_name]


def tool_calls(trace: Trace) -> list[tuple[str | None, Any, str | None]]:
    """(tool name, input, call id) of every step that carries a tool input, in order."""
    return [(step.tool_name, step.tool_input, step.tool_call_id) for step in trace.steps if step.tool_input is not None]


def only_trace(traces: list[Trace], where: str = "test") -> Trace:
    """The one trace a payload held, after checking that it is one and that it is valid."""
    assert len(traces) == 1
    validate_trace(traces[0], where)
    return traces[0]


def jsonl(*documents: Any) -> bytes:
    """The documents as JSONL: one per line, with a final newline."""
    return b"\n".join(orjson.dumps(document) for document in documents) + b"\n"


def assert_fixture_parses(parse: Parse, looks_like: LooksLike, name: str) -> None:
    """A real fixture is detected, parses into valid traces, and parses the same way twice."""
    raw = real_fixture(name)
    traces = parse(raw)
    for index, trace in enumerate(traces):
        validate_trace(trace, f"trace {index}")
    assert parse(raw) == traces
    assert looks_like(first_value(raw))


def assert_parses_or_refuses(parse: Parse, looks_like: LooksLike, value: Any) -> None:
    """Arbitrary JSON is shape-tested without error, and either parses into valid traces or raises InvalidArgument."""
    assert looks_like(value) in (True, False)
    try:
        traces = parse(orjson.dumps(value))
    except InvalidArgument:
        return
    for trace in traces:
        validate_trace(trace, "generated")


def assert_not_detected(looks_like: LooksLike, directory: str) -> None:
    """No real fixture of another format's directory has this format's shape."""
    for name in sorted(os.listdir(REAL_FIXTURES / directory)):
        assert not looks_like(first_value(real_fixture(f"{directory}/{name}"))), name
