"""The `otel` import adapter: the real captures in tests/fixtures/real/otlp, detection, and how errors are named.

The rules themselves are tested beside the pieces in services/ingest/tests/otel/: conventions, the history merge
and decoding, on synthetic documents built with support.otlp (their docstrings say "synthetic").
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from stash_common.errors import InvalidArgument
from stash_ingest.adapters.otel import looks_like_otel, parse_otel
from stash_ingest.adapters.reading import first_value, read_records
from stash_ingest.otel.documents import group_spans
from stash_ingest.otel.traces import build_trace
from stash_ingest.traces import validate_trace
from support.fixtures import real_fixture
from support.otlp import (
    SYSTEM,
    TRACE_ID,
    chat_span,
    otlp_document,
    parse_one,
    span_dict,
    text_message,
)
from support.traces import jsonl, roles, tool_calls

OPENLLMETRY = "otlp/genai-interlingua-openllmetry-0.62.3.json"
OPENINFERENCE = "otlp/genai-interlingua-openinference-openai-0.1.58.json"
OTEL_UTIL = "otlp/genai-interlingua-otel-util-genai-1.1b0.json"
PROTO_EXAMPLE = "otlp/otel-proto-examples-trace.json"
FILE_EXPORTER = "otlp/otel-spec-file-exporter-traces.jsonl"
ALL_FIXTURES = (OPENLLMETRY, OPENINFERENCE, OTEL_UTIL, PROTO_EXAMPLE, FILE_EXPORTER)
INTERLINGUA = (OPENLLMETRY, OPENINFERENCE, OTEL_UTIL)


# ---------------------------------------------------------------- real captures


def test_parse_openllmetry_capture_builds_one_trace_from_two_resource_spans() -> None:
    trace = parse_one(real_fixture(OPENLLMETRY))
    assert trace.external_id == "77d66be22a4ffc8149309684b3a319f7"
    assert roles(trace) == ["system", "user", "assistant"]
    assert trace.steps[0].content == SYSTEM
    assert trace.steps[1].content == "Where is order A-1187?"
    assert trace.steps[2].content == ""
    assert trace.steps[2].metadata == {"timestamp": "2026-09-07T13:54:23.838423+00:00"}
    assert trace.metadata == {
        "service_name": "capture",
        "provider": "openai",
        "model": "gpt-4o-mini-2024-07-18",
        "usage": {"input_tokens": 412, "output_tokens": 27, "cache_read_input_tokens": 256},
        "llm_calls": 1,
    }


def test_parse_openllmetry_capture_keeps_the_workflow_span_and_decodes_its_double_encoded_output() -> None:
    workflow, chat = parse_one(real_fixture(OPENLLMETRY)).spans
    assert (workflow.id, workflow.parent_id, workflow.name, workflow.kind) == (
        "aaa24d5a6cca68bf",
        None,
        "support_triage.workflow",
        "workflow",
    )
    assert workflow.input == {"args": [], "kwargs": {}}
    assert workflow.output["id"] == "chatcmpl-CD8yqQ2y3kZs1o0Wm7bT"
    assert workflow.output["choices"][0]["finish_reason"] == "tool_calls"
    assert workflow.step_indices == ()
    assert (chat.id, chat.parent_id, chat.name, chat.kind) == ("76a26812b532f640", workflow.id, "openai.chat", "llm")
    assert (chat.start_ns, chat.end_ns) == (1788789263812545000, 1788789263838423000)
    assert chat.step_indices == (0, 1, 2)
    assert chat.input[1] == {"role": "user", "parts": [{"content": "Where is order A-1187?", "type": "text"}]}


def test_parse_openinference_capture_reads_flattened_messages_and_tool_calls() -> None:
    trace = parse_one(real_fixture(OPENINFERENCE))
    assert trace.external_id == "9ed94f9bdc36b397e11c51f77d49e01a"
    assert roles(trace) == ["system", "user", "assistant"]
    assert trace.steps[1].content == "Where is order A-1187?"
    assert trace.steps[2].metadata == {"timestamp": "2026-09-07T13:25:18.993675+00:00"}
    assert trace.metadata["usage"] == {"input_tokens": 412, "output_tokens": 27, "cache_read_input_tokens": 256}
    assert trace.metadata["model"] == "gpt-4o-mini-2024-07-18"
    (span,) = trace.spans
    assert (span.id, span.name, span.kind, span.step_indices) == (
        "e9856d6fe698c4f2",
        "ChatCompletion",
        "llm",
        (0, 1, 2),
    )
    assert span.input["messages"][1] == {"role": "user", "content": "Where is order A-1187?"}
    assert span.output["choices"][0]["message"]["tool_calls"][0]["id"] == "call_9RtYbK2mXqLp"


def test_parse_otel_util_capture_reads_current_genai_semconv() -> None:
    trace = parse_one(real_fixture(OTEL_UTIL))
    assert trace.external_id == "053074667b1113278073667614bb3e19"
    assert roles(trace) == ["system", "user", "assistant"]
    assert trace.steps[2].metadata == {"timestamp": "2026-09-07T14:41:14.047335+00:00"}
    assert trace.metadata == {
        "service_name": "capture",
        "provider": "openai",
        "model": "gpt-4o-mini-2024-07-18",
        "usage": {"input_tokens": 412, "output_tokens": 27},
        "llm_calls": 1,
    }
    (span,) = trace.spans
    assert (span.id, span.parent_id, span.name, span.kind) == ("03491beea3cb073d", None, "chat gpt-4o-mini", "llm")
    assert span.output[0]["finish_reason"] == "tool_calls"


def test_parse_interlingua_captures_yield_the_same_conversation_from_three_instrumentations() -> None:
    traces = [parse_one(real_fixture(name)) for name in INTERLINGUA]
    expected_call = ("lookup_order", {"order_id": "A-1187"}, "call_9RtYbK2mXqLp")
    for trace in traces:
        assert roles(trace) == ["system", "user", "assistant"]
        assert [step.content for step in trace.steps] == [SYSTEM, "Where is order A-1187?", ""]
        assert tool_calls(trace) == [expected_call]


@pytest.mark.parametrize("name", [PROTO_EXAMPLE, FILE_EXPORTER])
def test_parse_otel_rejects_captures_without_llm_spans(name: str) -> None:
    with pytest.raises(InvalidArgument, match=r"resourceSpans: no LLM messages found in any span \(looked for gen_ai"):
        parse_otel(real_fixture(name))


def test_build_trace_returns_none_for_the_official_example_whose_ids_are_upper_case() -> None:
    groups = group_spans([value for _, value in read_records(real_fixture(PROTO_EXAMPLE))])
    assert list(groups) == ["5b8efff798038103d269b633813fc60c"]
    (span,) = groups["5b8efff798038103d269b633813fc60c"]
    assert span["startTimeUnixNano"] == 1544712660000000000  # exact: a float parser would lose nanoseconds
    assert span["resource"]["attributes"][0]["value"] == {"stringValue": "my.service"}
    assert span["scope"]["name"] == "my.library"
    assert build_trace("5b8efff798038103d269b633813fc60c", groups["5b8efff798038103d269b633813fc60c"]) is None


def test_build_trace_returns_none_for_the_file_exporter_lines_with_empty_ids() -> None:
    groups = group_spans([value for _, value in read_records(real_fixture(FILE_EXPORTER))])
    assert list(groups) == [""]
    assert [span["name"] for span in groups[""]] == ["operationA", "operationB"] * 4
    assert build_trace("", groups[""]) is None


def test_build_trace_parses_the_official_example_span_beside_a_synthetic_llm_span() -> None:
    """Synthetic: one LLM span added to the official example's trace, so its spans become a Trace."""
    (span,) = group_spans([orjson.loads(real_fixture(PROTO_EXAMPLE))])["5b8efff798038103d269b633813fc60c"]
    llm = {
        **chat_span(
            "00000000000000aa", 1544712660500000000, [text_message("user", "hi")], [text_message("assistant", "hello")]
        )
    }
    llm["traceId"] = "5B8EFFF798038103D269B633813FC60C"
    trace = build_trace("5b8efff798038103d269b633813fc60c", [span, llm])
    assert trace is not None and trace.external_id == "5b8efff798038103d269b633813fc60c"
    server = trace.spans[0]
    assert (server.id, server.parent_id, server.name, server.kind) == (
        "eee19b7ec3c1b174",
        "eee19b7ec3c1b173",
        "I'm a server span",
        "server",
    )
    assert (server.start_ns, server.end_ns, server.input, server.output) == (
        1544712660000000000,
        1544712661000000000,
        None,
        None,
    )
    assert trace.spans[1].step_indices == (0, 1)


def test_build_trace_numbers_spans_with_empty_ids_in_start_order() -> None:
    """Synthetic: an LLM span added to the file-exporter lines (empty trace and span ids, integer status)."""
    documents = [value for _, value in read_records(real_fixture(FILE_EXPORTER))]
    llm = chat_span("", 1581452772000000000, [text_message("user", "hi")], [text_message("assistant", "hello")])
    spans = [*group_spans(documents)[""], {**llm, "name": "chat", "traceId": "", "parentSpanId": ""}]
    trace = build_trace("", spans)
    assert trace is not None and trace.external_id is None
    validate_trace(trace, "test")
    assert [span.id for span in trace.spans] == [f"unset-{n}" for n in range(9)]
    assert trace.spans[0].name == "chat" and trace.spans[0].step_indices == (0, 1)
    assert {span.name for span in trace.spans[1:]} == {"operationA", "operationB"}
    assert all(span.parent_id is None for span in trace.spans)
    assert trace.spans[1].start_ns == 1581452772000000321


# ---------------------------------------------------------------- detection


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_looks_like_otel_accepts_every_capture(name: str) -> None:
    assert looks_like_otel(first_value(real_fixture(name)))


@pytest.mark.parametrize(
    "value",
    [
        {"messages": [{"role": "user", "content": "hi"}]},
        {"steps": [{"role": "user", "content": "hi"}]},
        {"trace": {"id": "t"}, "observations": []},
        {"run_type": "llm", "dotted_order": "x"},
        {"type": "session_meta", "payload": {}},
        {"sessionId": "s", "type": "user"},
        {"resourceSpans": "not a list"},
        [],
        None,
        "resourceSpans",
    ],
)
def test_looks_like_otel_rejects_other_shapes(value: Any) -> None:
    assert not looks_like_otel(value)


# ---------------------------------------------------------------- errors


def _bad_messages(value: str) -> bytes:
    span = span_dict("b7ad6b7169203331", 1, {"gen_ai.input.messages": value, "gen_ai.output.messages": "[]"})
    return orjson.dumps(otlp_document(span))


def test_parse_otel_names_trace_span_and_attribute_when_messages_are_not_json() -> None:
    with pytest.raises(
        InvalidArgument, match=rf"trace {TRACE_ID}: span b7ad6b7169203331: gen_ai.input.messages: is not valid JSON"
    ):
        parse_otel(_bad_messages("Where is A-1?"))


def test_parse_otel_rejects_messages_of_the_wrong_shape() -> None:
    with pytest.raises(
        InvalidArgument, match=r"span b7ad6b7169203331: gen_ai.input.messages: must be a JSON list of message objects"
    ):
        parse_otel(_bad_messages('{"role": "user"}'))
    with pytest.raises(InvalidArgument, match=r"gen_ai.input.messages\[0\].parts: must be a list of part objects"):
        parse_otel(_bad_messages('[{"role": "user", "parts": "hi"}]'))
    with pytest.raises(
        InvalidArgument, match=r"gen_ai.input.messages\[0\].role: must be system, user, assistant or tool"
    ):
        parse_otel(_bad_messages('[{"role": "narrator", "parts": []}]'))


def test_parse_otel_names_the_line_of_a_bad_span_id() -> None:
    bad = chat_span("not-an-id!", 1, [text_message("user", "Hi")], [])
    with pytest.raises(
        InvalidArgument,
        match=r"line 2: resourceSpans\[0\]\.scopeSpans\[0\]\.spans\[0\]\.spanId: must be a hex or base64 id",
    ):
        parse_otel(jsonl(otlp_document(), otlp_document(bad)))


def test_parse_otel_names_the_location_of_a_bad_timestamp() -> None:
    span = {**chat_span("b7ad6b7169203331", 1, [text_message("user", "Hi")], []), "startTimeUnixNano": "soon"}
    where = r"document: resourceSpans\[0\]\.scopeSpans\[0\]\.spans\[0\]\.startTimeUnixNano"
    with pytest.raises(InvalidArgument, match=rf"{where}: must be nanoseconds since the epoch"):
        parse_otel(orjson.dumps(otlp_document(span)))


def test_build_trace_names_the_trace_and_span_position_of_a_bad_timestamp() -> None:
    span = {**chat_span("b7ad6b7169203331", 1, [text_message("user", "Hi")], []), "endTimeUnixNano": "-5"}
    with pytest.raises(InvalidArgument, match=rf"trace {TRACE_ID}: spans\[1\]\.endTimeUnixNano: must be nanoseconds"):
        build_trace(TRACE_ID, [chat_span("b7ad6b7169203332", 1, [], []), span])


def test_parse_otel_rejects_a_line_that_is_not_otlp() -> None:
    with pytest.raises(
        InvalidArgument, match=r"line 2: expected an OTLP/JSON object with a resourceSpans or resourceLogs list"
    ):
        parse_otel(jsonl(otlp_document(), {"messages": []}))


def test_parse_otel_rejects_an_empty_payload() -> None:
    with pytest.raises(InvalidArgument, match=r"payload: is empty"):
        parse_otel(b"\n\n")
