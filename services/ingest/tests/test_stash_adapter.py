"""The Stash Trace Format adapter: strict reading, the export writer, and dump → parse round trips."""

from __future__ import annotations

import os
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stash_common.errors import InvalidArgument
from stash_ingest.adapters.anthropic_messages import parse_anthropic_messages
from stash_ingest.adapters.openai_chat import parse_openai_chat
from stash_ingest.adapters.stash import dump_stash, looks_like_stash, parse_stash
from stash_ingest.traces import ROLES, Span, Step, Trace, validate_trace
from support.fixtures import REAL_FIXTURES, real_fixture
from support.traces import assert_not_detected

FULL_LINE = {
    "id": "refund-1182",
    "title": "Refund request for order 1182",
    "metadata": {"agent": "support-bot", "model": "qwen3-8b"},
    "steps": [
        {"role": "system", "content": "You are a support agent..."},
        {"role": "user", "content": "I want a refund for order 1182"},
        {
            "role": "assistant",
            "content": "",
            "tool_name": "lookup_order",
            "tool_input": {"order_id": "1182"},
            "tool_call_id": "call_1",
        },
        {"role": "tool", "content": '{"status": "delivered"}', "tool_name": "lookup_order", "tool_call_id": "call_1"},
        {"role": "assistant", "content": "Your order was delivered on...", "metadata": {"label": {"actor": "agent"}}},
    ],
    "spans": [
        {
            "id": "s1",
            "name": "chat",
            "kind": "llm",
            "start_ns": "1700000000000000000",
            "end_ns": "1700000000500000000",
            "input": {"messages": 2},
            "output": "ok",
            "step_indices": [2],
        },
        {
            "id": "s2",
            "parent_id": "s1",
            "name": "lookup_order",
            "start_ns": "1700000000100000000",
            "end_ns": "1700000000200000000",
        },
    ],
}


def _line(document: Any) -> bytes:
    return orjson.dumps(document)


def _jsonl(*documents: Any) -> bytes:
    return b"\n".join(_line(document) for document in documents) + b"\n"


def _minimal(**fields: Any) -> dict[str, Any]:
    return {"steps": [{"role": "user", "content": "hi"}], **fields}


def test_parse_reads_every_field_of_the_spec_example() -> None:
    [trace] = parse_stash(_jsonl(FULL_LINE))
    assert trace.external_id == "refund-1182"
    assert trace.title == "Refund request for order 1182"
    assert trace.metadata == {"agent": "support-bot", "model": "qwen3-8b"}
    assert [step.role for step in trace.steps] == ["system", "user", "assistant", "tool", "assistant"]
    assert trace.steps[2] == Step("assistant", "", "lookup_order", {"order_id": "1182"}, "call_1")
    assert trace.steps[3].tool_call_id == "call_1" and trace.steps[3].tool_input is None
    assert trace.steps[4].metadata == {"label": {"actor": "agent"}}
    assert trace.spans[0] == Span(
        "s1", "chat", 1700000000000000000, 1700000000500000000, None, "llm", {"messages": 2}, "ok", (2,)
    )
    assert trace.spans[1].parent_id == "s1" and trace.spans[1].step_indices == ()


def test_parse_gives_one_trace_per_line_skipping_blank_lines() -> None:
    raw = _line(_minimal(id="a")) + b"\n\n  \n" + _line(_minimal(id="b")) + b"\n"
    assert [trace.external_id for trace in parse_stash(raw)] == ["a", "b"]


def test_parse_defaults_optional_fields_when_absent_or_null() -> None:
    [trace] = parse_stash(
        _line({"id": None, "title": None, "metadata": None, "steps": [{"role": "user", "content": ""}]})
    )
    assert trace == Trace(steps=(Step("user", ""),))


def test_parse_keeps_line_separators_inside_strings_in_jsonl() -> None:
    text = "first\u2028second\u2029third"
    raw = _jsonl(_minimal(title=text), {"steps": [{"role": "user", "content": text}]})
    first, second = parse_stash(raw)
    assert first.title == text
    assert second.steps[0].content == text


def test_parse_accepts_integer_nanoseconds_exactly() -> None:
    span = {"id": "s", "name": "n", "start_ns": 1544712660000000001, "end_ns": 1544712660300000001}
    [trace] = parse_stash(_line(_minimal(spans=[span])))
    assert (trace.spans[0].start_ns, trace.spans[0].end_ns) == (1544712660000000001, 1544712660300000001)


def test_parse_reads_a_pretty_printed_trace_or_an_array_of_traces() -> None:
    assert parse_stash(orjson.dumps(FULL_LINE, option=orjson.OPT_INDENT_2))[0].external_id == "refund-1182"
    traces = parse_stash(orjson.dumps([_minimal(id="a"), _minimal(id="b")], option=orjson.OPT_INDENT_2))
    assert [trace.external_id for trace in traces] == ["a", "b"]
    assert [trace.external_id for trace in parse_stash(_line([_minimal(id="c")]))] == ["c"]


@pytest.mark.parametrize(
    ("document", "match"),
    [
        ({"steps": [{"role": "user", "content": 5}]}, r"^line 2: steps\[0\]\.content: must be a string, not a number"),
        ({"steps": {"role": "user"}}, r"^line 2: steps: must be an array, not an object"),
        ({"title": "no steps"}, r"^line 2: steps: must be an array, not null"),
        ({"steps": []}, r"^line 2: steps: a trace needs at least one step"),
        ({"steps": ["hello"]}, r"^line 2: steps\[0\]: must be an object with `role` and `content`, not a string"),
        ({"steps": [{"role": "human", "content": "x"}]}, r"^line 2: steps\[0\]\.role: must be one of system, user"),
        ({"steps": [{"role": "user"}]}, r"^line 2: steps\[0\]\.content: is required"),
        ({"steps": [{"content": "x"}]}, r"^line 2: steps\[0\]\.role: is required"),
        (
            {"steps": [{"role": "assistant", "content": "", "tool_name": "f", "tool_input": "[1]"}]},
            r"^line 2: steps\[0\]\.tool_input: must be an object, not a string",
        ),
        (
            {"steps": [{"role": "user", "content": "x", "tool_name": 3}]},
            r"^line 2: steps\[0\]\.tool_name: must be a string",
        ),
        (
            {"steps": [{"role": "user", "content": "x", "metadata": []}]},
            r"^line 2: steps\[0\]\.metadata: must be an object",
        ),
        (
            {"steps": [{"role": "user", "content": "x", "tool_inputs": {}}]},
            r"^line 2: steps\[0\]\.tool_inputs: is not a",
        ),
        (_minimal(tags=["x"]), r"^line 2: tags: is not a Stash trace field; expected id, title, metadata"),
        (_minimal(id=7), r"^line 2: id: must be a string, not a number"),
        (_minimal(id=""), r"^line 2: id: must be 1 to 500 characters"),
        (_minimal(metadata="x"), r"^line 2: metadata: must be an object, not a string"),
        ({"steps": [{"role": "system", "content": "x"}]}, r"^line 2: steps: a trace with only system steps"),
        (_minimal(spans={}), r"^line 2: spans: must be an array"),
        (
            _minimal(spans=[{"id": "s", "name": "n", "start_ns": "1"}]),
            r"^line 2: spans\[0\]\.end_ns: must be nanoseconds",
        ),
        (
            _minimal(spans=[{"id": "s", "name": "n", "start_ns": "1.5", "end_ns": "2"}]),
            r"^line 2: spans\[0\]\.start_ns: must be nanoseconds .* not a string",
        ),
        (
            _minimal(spans=[{"id": "s", "name": "n", "start_ns": 1.5e19, "end_ns": "2"}]),
            r"^line 2: spans\[0\]\.start_ns: must be nanoseconds .* not a number",
        ),
        (
            _minimal(spans=[{"id": "s", "name": "n", "start_ns": True, "end_ns": "2"}]),
            r"^line 2: spans\[0\]\.start_ns: must be nanoseconds .* not a boolean",
        ),
        (
            _minimal(spans=[{"id": "s", "name": "n", "start_ns": "5", "end_ns": "2"}]),
            r"^line 2: spans\[0\]\.end_ns: must not precede start_ns",
        ),
        (
            _minimal(spans=[{"id": "s", "name": "n", "start_ns": "1", "end_ns": "2", "step_indices": ["0"]}]),
            r"^line 2: spans\[0\]\.step_indices\[0\]: must be an integer, not a string",
        ),
        (
            _minimal(spans=[{"id": "s", "name": "n", "start_ns": "1", "end_ns": "2", "step_indices": [1]}]),
            r"^line 2: spans\[0\]\.step_indices: step 1 does not exist",
        ),
        (_minimal(spans=[{"name": "n", "start_ns": "1", "end_ns": "2"}]), r"^line 2: spans\[0\]\.id: is required"),
        ("a string", r"^line 2: must be a JSON object with `steps` \(one trace per line\), not a string"),
    ],
)
def test_parse_rejects_wrong_json_types_naming_line_and_field(document: Any, match: str) -> None:
    raw = _line(_minimal()) + b"\n" + _line(document)
    with pytest.raises(InvalidArgument, match=match):
        parse_stash(raw)


def test_parse_rejects_invalid_json_naming_the_line() -> None:
    with pytest.raises(InvalidArgument, match=r"^line 2: is not valid JSON"):
        parse_stash(_line(_minimal()) + b'\n{"steps": [\n')


def test_parse_rejects_an_empty_payload() -> None:
    with pytest.raises(InvalidArgument, match=r"^payload: is empty"):
        parse_stash(b"\n \n")


def test_dump_writes_one_line_with_decimal_string_times_and_stable_keys() -> None:
    trace = parse_stash(_line(FULL_LINE))[0]
    dumped = dump_stash(trace)
    assert not dumped.endswith(b"\n") and b"\n" not in dumped
    document = orjson.loads(dumped)
    assert list(document) == ["id", "title", "metadata", "steps", "spans"]
    assert list(document["steps"][2]) == ["role", "content", "tool_name", "tool_input", "tool_call_id"]
    assert document["steps"][0] == {"role": "system", "content": "You are a support agent..."}
    assert document["spans"][0]["start_ns"] == "1700000000000000000"
    assert list(document["spans"][1]) == ["id", "parent_id", "name", "start_ns", "end_ns", "step_indices"]
    assert document == FULL_LINE | {"spans": [FULL_LINE["spans"][0], FULL_LINE["spans"][1] | {"step_indices": []}]}


def test_dump_is_deterministic_and_omits_empty_optionals() -> None:
    trace = Trace(steps=(Step("user", "hi"),))
    assert dump_stash(trace) == b'{"steps":[{"role":"user","content":"hi"}]}'
    assert dump_stash(trace) == dump_stash(Trace(steps=(Step("user", "hi"),)))


def test_dump_keeps_line_separators_raw_and_parse_reads_them_back() -> None:
    trace = Trace(steps=(Step("user", "a\u2028b\u2029c\nd"),), title="t\u2028")
    dumped = dump_stash(trace)
    assert "\u2028".encode() in dumped and b"\n" not in dumped
    assert parse_stash(dumped + b"\n" + dumped) == [trace, trace]


def test_dump_round_trips_every_real_fixture_trace() -> None:
    parsers = {"openai-chat": parse_openai_chat, "anthropic-messages": parse_anthropic_messages}
    for directory, parse in parsers.items():
        for name in sorted(os.listdir(REAL_FIXTURES / directory)):
            for trace in parse(real_fixture(f"{directory}/{name}")):
                assert parse_stash(dump_stash(trace)) == [trace], name


def test_looks_like_stash_claims_only_the_steps_shape() -> None:
    assert looks_like_stash(FULL_LINE)
    assert looks_like_stash(_minimal())
    assert not looks_like_stash({"messages": [{"role": "user", "content": "hi"}]})
    assert not looks_like_stash({"type": "message", "role": "assistant", "content": []})
    assert not looks_like_stash({"resourceSpans": []})
    assert not looks_like_stash({"timestamp": "2025-01-01T00:00:00Z", "type": "session_meta", "payload": {}})
    assert not looks_like_stash({"steps": [{"name": "a run step"}]})
    assert not looks_like_stash([_minimal()])
    assert not looks_like_stash(None)


# --- property: dump → parse is the identity on valid traces -------------------------------------------------

# U+0000 is refused by validation (PostgreSQL text cannot hold it), so valid traces never carry it.
_SEPARATORS = st.sampled_from(["\u2028", "\u2029", "\n", "\r", "\t", '"', "\\", "é", "😀"])
_CHARACTERS = st.characters(codec="utf-8", exclude_characters="\x00")
_TEXT = st.text(alphabet=st.one_of(_CHARACTERS, _SEPARATORS), max_size=30)
_JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),  # orjson's exact integer range
    st.floats(allow_nan=False, allow_infinity=False),
    _TEXT,
)
_JSON = st.recursive(
    _JSON_SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_TEXT, inner, max_size=4)),
    max_leaves=12,
)
_OBJECT = st.dictionaries(_TEXT, _JSON, max_size=4)
_NANOSECONDS = st.integers(min_value=0, max_value=2**62)


@st.composite
def _steps(draw: st.DrawFn) -> tuple[Step, ...]:
    step = st.builds(
        Step,
        role=st.sampled_from(ROLES),
        content=_TEXT,
        tool_name=st.none() | _TEXT,
        tool_input=st.none() | _OBJECT,
        tool_call_id=st.none() | _TEXT,
        metadata=_OBJECT,
    )
    steps = draw(st.lists(step, min_size=1, max_size=6))
    if all(item.role == "system" for item in steps):
        steps.append(Step("user", draw(_TEXT)))
    return tuple(steps)


@st.composite
def _spans(draw: st.DrawFn, step_count: int) -> tuple[Span, ...]:
    ids = draw(st.lists(st.text(_CHARACTERS, min_size=1, max_size=8), unique=True, max_size=4))
    spans = []
    for index, span_id in enumerate(ids):
        start = draw(_NANOSECONDS)
        # Parents come from earlier spans (no cycles) or name a span outside the trace, which is allowed.
        parent = draw(st.none() | st.sampled_from([*ids[:index], "outside"]))
        spans.append(
            Span(
                id=span_id,
                name=draw(_TEXT),
                start_ns=start,
                end_ns=start + draw(st.integers(min_value=0, max_value=2**62 - 1)),  # at most 2**63 - 1 in all
                parent_id=parent,
                kind=draw(st.none() | _TEXT),
                input=draw(_JSON),
                output=draw(_JSON),
                step_indices=tuple(draw(st.lists(st.integers(0, step_count - 1), max_size=3))),
            )
        )
    return tuple(spans)


@st.composite
def _traces(draw: st.DrawFn) -> Trace:
    steps = draw(_steps())
    return Trace(
        steps=steps,
        external_id=draw(st.none() | st.text(_CHARACTERS, min_size=1, max_size=20)),
        title=draw(st.none() | _TEXT),
        metadata=draw(_OBJECT),
        spans=draw(_spans(len(steps))),
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_traces())
def test_dump_then_parse_round_trips_generated_traces(trace: Trace) -> None:
    validate_trace(trace, "generated")
    dumped = dump_stash(trace)
    assert b"\n" not in dumped
    assert parse_stash(dumped) == [trace]
    assert parse_stash(dumped + b"\n" + dumped + b"\n") == [trace, trace]


@pytest.mark.parametrize(
    "directory", ["anthropic-messages", "claude-code", "codex", "langfuse", "langsmith", "openai-chat", "otlp"]
)
def test_looks_like_stash_is_false_for_other_formats_real_fixtures(directory: str) -> None:
    assert_not_detected(looks_like_stash, directory)
