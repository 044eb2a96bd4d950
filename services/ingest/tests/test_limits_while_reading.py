"""The limits are applied while a payload is read, in every import format: an input far over a limit is
refused, and what lies beyond the limit is never read.

"Never read" is shown two ways. A poisoned tail: the item right after the limit is broken (a line that
is not JSON, a step with an unknown role), so a reader that went on would fail on it instead of on the
limit. And, for the 1,000,000-step trace of the issue, the peak memory of a process that refuses it.
"""

from __future__ import annotations

import subprocess
import sys
import tracemalloc
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from stash_common.errors import InvalidArgument, ResourceExhausted
from stash_ingest.adapters.reading import STREAM_FROM
from stash_ingest.adapters.registry import get_adapter
from stash_ingest.imports import ImportRequest, parse_payload
from stash_ingest.limits import DEFAULT_LIMITS
from stash_ingest.otel.traces import build_trace
from stash_ingest.otlp import OtlpRequest, accept_spans, read_spans
from support.hostile import (
    LONG_TRACE,
    MANY_TRACES,
    TRACE_ID,
    WIDE_TRACE,
    otlp_protobuf_span,
    otlp_protobuf_spans,
    otlp_protobuf_steps,
)
from support.otlp import chat_span, otlp_document, text_message

SMALL = replace(DEFAULT_LIMITS, traces_per_import=50, steps_per_trace=50, spans_per_trace=50)
FAR_OVER = 40 * 50  # forty times each small limit


def _refusal(format_name: str, raw: bytes) -> InvalidArgument:
    with pytest.raises(InvalidArgument) as caught:
        parse_payload(ImportRequest("owner", format_name, raw, limits=SMALL))
    return caught.value


@pytest.mark.parametrize("format_name", sorted(LONG_TRACE))
def test_a_trace_far_over_the_step_limit_is_refused_naming_its_steps(format_name: str) -> None:
    refusal = _refusal(format_name, LONG_TRACE[format_name](FAR_OVER))

    assert refusal.field.endswith(": steps")
    assert "steps exceed the limit of 50 per trace" in str(refusal)


@pytest.mark.parametrize("format_name", sorted(WIDE_TRACE))
def test_a_trace_far_over_the_span_limit_is_refused_naming_its_spans(format_name: str) -> None:
    refusal = _refusal(format_name, WIDE_TRACE[format_name](FAR_OVER))

    assert refusal.field.endswith(": spans")
    assert "spans exceed the limit of 50 per trace" in str(refusal)


@pytest.mark.parametrize("format_name", sorted(MANY_TRACES))
def test_an_import_far_over_the_trace_limit_is_refused_as_too_large(format_name: str) -> None:
    with pytest.raises(ResourceExhausted, match="one import may hold at most 50 traces"):
        parse_payload(ImportRequest("owner", format_name, MANY_TRACES[format_name](FAR_OVER), limits=SMALL))


@pytest.mark.parametrize("format_name", sorted(MANY_TRACES))
def test_an_import_at_the_trace_limit_is_read_whole(format_name: str) -> None:
    _, traces = parse_payload(ImportRequest("owner", format_name, MANY_TRACES[format_name](50), limits=SMALL))

    assert len(traces) == 50


def _poisoned_jsonl(raw: bytes, keep: int) -> bytes:
    """The first `keep` lines of a JSONL payload, then a line that is not JSON, then the rest."""
    lines = raw.split(b"\n")
    return b"\n".join([*lines[:keep], b"{not json", *lines[keep:]])


@pytest.mark.parametrize(("format_name", "keep"), [("claude_code", 51), ("codex", 52)])
def test_a_transcript_is_not_read_past_its_step_limit(format_name: str, keep: int) -> None:
    # Lines 1..keep make 51 steps (the Codex rollout starts with its session line): one over the limit.
    raw = _poisoned_jsonl(LONG_TRACE[format_name](FAR_OVER), keep)

    refusal = _refusal(format_name, raw)

    assert refusal.field.endswith(": steps"), str(refusal)


@pytest.mark.parametrize("format_name", ["stash", "openai_chat", "anthropic_messages", "langsmith"])
def test_an_import_is_not_read_past_its_trace_limit(format_name: str) -> None:
    raw = _poisoned_jsonl(MANY_TRACES[format_name](FAR_OVER), 51)

    with pytest.raises(ResourceExhausted):
        parse_payload(ImportRequest("owner", format_name, raw, limits=SMALL))


@pytest.mark.parametrize(
    ("format_name", "messages_key", "poison"),
    [
        ("stash", "steps", {"role": "bogus", "content": "x"}),
        ("openai_chat", "messages", {"role": "bogus", "content": "x"}),
        ("anthropic_messages", "messages", {"role": "bogus", "content": "x"}),
    ],
)
def test_a_trace_is_not_read_past_its_step_limit(format_name: str, messages_key: str, poison: dict[str, str]) -> None:
    document = orjson.loads(LONG_TRACE[format_name](51))
    document[messages_key].append(poison)

    refusal = _refusal(format_name, orjson.dumps(document))

    assert refusal.field.endswith(": steps"), str(refusal)


def _poisoned_messages() -> str:
    """GenAI messages as JSON text of over STREAM_FROM characters: 51 messages (one over the small limit), then one
    whose role is not a string, then padding."""
    padding = "p" * 1000
    messages = [text_message("user" if n % 2 == 0 else "assistant", f"m{n} {padding}") for n in range(51)]
    messages.append({"role": 7, "parts": []})
    messages += [text_message("user", padding)] * (STREAM_FROM // len(padding))
    return orjson.dumps(messages).decode()


def test_an_otlp_message_text_is_counted_before_it_is_decoded() -> None:
    # Decoding the text would stop at the poisoned role; counting it by streaming stops at the 51st message.
    span = chat_span("b000000000000001", 1, [], [])
    span["attributes"][1]["value"] = {"stringValue": _poisoned_messages()}  # gen_ai.input.messages

    refusal = _refusal("otel", orjson.dumps(otlp_document(span)))

    assert refusal.field == f"trace {TRACE_ID}: steps", str(refusal)


def test_an_otlp_protobuf_span_is_counted_before_its_messages_are_decoded() -> None:
    request = OtlpRequest("owner", protobuf=otlp_protobuf_span(_poisoned_messages()))
    accepted, _ = accept_spans(read_spans(request))

    with pytest.raises(InvalidArgument) as caught:
        build_trace(TRACE_ID, list(accepted.values()), SMALL)

    assert caught.value.field == f"trace {TRACE_ID}: steps", str(caught.value)


def test_an_otlp_protobuf_span_is_refused_while_it_is_read() -> None:
    # Counted on the wire, the text stops at the 51st message, before the span or its poisoned message is decoded.
    request = OtlpRequest("owner", protobuf=otlp_protobuf_span(_poisoned_messages()), limits=SMALL)

    with pytest.raises(InvalidArgument) as caught:
        list(read_spans(request))

    assert caught.value.field == f"trace {TRACE_ID}: steps", str(caught.value)


def test_an_otlp_protobuf_span_of_no_llm_call_is_read_whatever_its_message_text() -> None:
    # A tool span's messages are never steps, as when the span is decoded: its text is not counted.
    export = ExportTraceServiceRequest.FromString(otlp_protobuf_span(_poisoned_messages()))
    export.resource_spans[0].scope_spans[0].spans[0].attributes[0].value.string_value = "execute_tool"
    request = OtlpRequest("owner", protobuf=export.SerializeToString(), limits=SMALL)

    assert len(list(read_spans(request))) == 1


def test_a_large_document_is_counted_before_it_is_parsed() -> None:
    # Over STREAM_FROM, the steps are counted by streaming: the broken JSON at the end is never reached.
    raw = LONG_TRACE["stash"](STREAM_FROM // 10)
    truncated = raw[: len(raw) // 2]
    assert len(truncated) > STREAM_FROM

    refusal = _refusal("stash", truncated)

    assert refusal.field == "line 1: steps"


_PEAK = """
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any
sys.path.insert(0, {tests!r})
from support.hostile import LONG_TRACE, otlp_protobuf_spans, otlp_protobuf_steps
from stash_common.errors import InvalidArgument
from stash_ingest.adapters.registry import get_adapter
from stash_ingest.limits import DEFAULT_LIMITS
from stash_ingest.otel.traces import build_trace
from stash_ingest.otlp import OtlpRequest, accept_spans, read_spans
raw = {build}
Path("/proc/self/clear_refs").write_text("5")  # VmHWM starts again from the current RSS
def kib(field):
    return next(int(line.split()[1]) for line in Path("/proc/self/status").read_text().splitlines()
                if line.startswith(field))
before = kib("VmRSS:")
try:
    {refuse}
except InvalidArgument as error:
    print(error.field, len(raw) >> 20, (kib("VmHWM:") - before) // 1024, sep="|")
"""


def _refused_with_peak(format_name: str) -> tuple[str, int, int]:
    """Where a 1,000,000-step trace of this format was refused, its size and the refusing process's peak, in MiB."""
    build = f"LONG_TRACE[{format_name!r}](1_000_000)"
    return _peak(build, f"get_adapter({format_name!r}).parse(raw, DEFAULT_LIMITS)")


def _peak(build: str, refuse: str) -> tuple[str, int, int]:
    """Where the payload `build` makes was refused by `refuse`, its size and the refusing process's peak, in MiB."""
    tests = str(Path(__file__).parents[3] / "tests")
    script = _PEAK.format(tests=tests, build=build, refuse=refuse)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    field, body_mib, peak_mib = result.stdout.strip().split("|")
    return field, int(body_mib), int(peak_mib)


@pytest.mark.parametrize(
    ("format_name", "field"),
    [
        ("stash", "line 1: steps"),
        ("openai_chat", "document: steps"),
        ("anthropic_messages", "document: steps"),
        ("claude_code", "transcript: steps"),
        ("codex", "rollout: steps"),
        ("langfuse", "document: steps"),
        ("langsmith", "document: steps"),
    ],
)
def test_a_million_step_trace_is_refused_in_bounded_memory(format_name: str, field: str) -> None:
    refused_at, _, peak_mib = _refused_with_peak(format_name)

    assert refused_at == field
    # Parsing the payload whole would take 170-270 MiB before anything could be counted.
    assert peak_mib < 20


def test_a_million_message_otlp_span_is_refused_in_memory_bounded_by_its_body() -> None:
    refused_at, body_mib, peak_mib = _refused_with_peak("otel")

    assert refused_at == f"trace {TRACE_ID}: steps"
    # The messages are JSON text inside the document, counted while the text is unescaped piece by piece.
    # Decoding the messages would take about 12 times the body (900 MiB for 74 MiB).
    assert peak_mib < 2 * body_mib


_SPAN_LIMIT = "replace(DEFAULT_LIMITS, spans_per_trace=50)"
_READ_SPANS = "accept_spans(read_spans(OtlpRequest('owner', protobuf=raw{limits}))"


# Over the span limit, its spans are decoded one at a time up to the limit (decoding the request whole took about
# twice its bytes). Over the step limit, a span's message text is counted on the wire up to the limit (decoding the
# span, then its text as a string, took 24 MiB above this 24 MiB body, 93 MiB above a 46 MiB one).
@pytest.mark.parametrize(
    ("body", "refuse", "what"),
    [
        pytest.param(
            "otlp_protobuf_spans(200_000)",
            _READ_SPANS.format(limits=f", limits={_SPAN_LIMIT}") + f", {_SPAN_LIMIT})",
            "spans",
            id="spans",
        ),
        pytest.param(
            "otlp_protobuf_steps(400_000)",
            f"build_trace({TRACE_ID!r}, list({_READ_SPANS.format(limits='')})[0].values()), DEFAULT_LIMITS)",
            "steps",
            id="steps",
        ),
    ],
)
def test_an_otlp_protobuf_body_far_over_a_limit_is_refused_in_memory_bounded_by_the_limit(
    body: str, refuse: str, what: str
) -> None:
    refused_at, body_mib, peak_mib = _peak(body, refuse)

    assert refused_at == f"trace {TRACE_ID}: {what}"
    assert body_mib >= 20
    assert peak_mib < body_mib // 4


def test_the_registry_parsers_take_the_limits() -> None:
    with pytest.raises(InvalidArgument, match="steps exceed the limit of 50"):
        get_adapter("stash").parse(LONG_TRACE["stash"](51), SMALL)


# --- every format, named or detected: refused in memory bounded by the limit, not by the input --------------------

BIG = 100_000  # items of an input far over the small limits, large enough (1-20 MB) to be counted by streaming
_OTLP_JSON_BUILDERS = {"steps": LONG_TRACE["otel"], "spans": WIDE_TRACE["otel"], "traces": MANY_TRACES["otel"]}


def _case(source: str, kind: str, builder: str) -> Any:
    return pytest.param(source, kind, builder, id=f"{source}-{kind}-{builder}")


_CASES = [
    *(_case(name, "steps", how) for name in sorted(LONG_TRACE) for how in ("named", "auto")),
    *(_case(name, "spans", how) for name in sorted(WIDE_TRACE) for how in ("named", "auto")),
    *(_case(name, "traces", how) for name in sorted(MANY_TRACES) for how in ("named", "auto")),
    *(_case("otlp_json", kind, "receiver") for kind in sorted(_OTLP_JSON_BUILDERS)),
    _case("otlp_protobuf", "steps", "receiver"),
    _case("otlp_protobuf", "spans", "receiver"),
]


def _receive(raw: bytes, protobuf: bool) -> None:
    """What the OTLP receiver does before it touches the database: accept the spans, build each trace, check it."""
    request = OtlpRequest("owner", protobuf=raw) if protobuf else OtlpRequest("owner", json=raw)
    accepted, _ = accept_spans(read_spans(replace(request, limits=SMALL)), SMALL)
    for trace_id in {trace_id for trace_id, _ in accepted}:
        build_trace(trace_id, [span for key, span in accepted.items() if key[0] == trace_id], SMALL)


def _payload(source: str, kind: str) -> bytes:
    if source == "otlp_protobuf":
        return otlp_protobuf_steps(BIG) if kind == "steps" else otlp_protobuf_spans(BIG)
    if source == "otlp_json":
        return _OTLP_JSON_BUILDERS[kind](BIG)
    return {"steps": LONG_TRACE, "spans": WIDE_TRACE, "traces": MANY_TRACES}[kind][source](BIG)


def _refuse(source: str, builder: str, raw: bytes) -> InvalidArgument | ResourceExhausted:
    with pytest.raises((InvalidArgument, ResourceExhausted)) as caught:
        if builder == "receiver":
            _receive(raw, protobuf=source == "otlp_protobuf")
        else:
            parse_payload(ImportRequest("owner", source if builder == "named" else "auto", raw, limits=SMALL))
    return caught.value


@pytest.mark.parametrize(("source", "kind", "builder"), _CASES)
def test_an_input_far_over_a_limit_is_refused_naming_it_before_it_is_read_whole(
    source: str, kind: str, builder: str
) -> None:
    raw = _payload(source, kind)
    tracemalloc.start()
    try:
        refusal = _refuse(source, builder, raw)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    if kind == "traces":
        assert isinstance(refusal, ResourceExhausted)
        assert "one import may hold at most 50 traces" in str(refusal)
    else:
        assert isinstance(refusal, InvalidArgument)
        assert refusal.field.endswith(f": {kind}"), str(refusal)
        assert f"{kind} exceed the limit of 50 per trace" in str(refusal)
    # Parsing the input whole would build 10-20 times its bytes; reading to the limit, a small part of them.
    # (An OTLP protobuf span is decoded whole: the one span holding all the messages, as a string, takes its bytes.)
    most = 3 * len(raw) if (source, kind) == ("otlp_protobuf", "steps") else len(raw) // 2
    assert peak < most, f"{peak >> 20} MiB traced while refusing {len(raw) >> 20} MiB"


# --- Langfuse and LangSmith: a call's prompt counted as the adapter reads it, never more ---------------------------

_PADDED = STREAM_FROM // 20  # items enough to make a document of over STREAM_FROM bytes, so it is counted by streaming
_PADDING = {"padding": "p" * STREAM_FROM}  # a member no adapter reads, for the same end


def _messages(count: int, role: str = "user") -> list[dict[str, str]]:
    return [{"role": role, "content": f"m{n}"} for n in range(count)]


def _observation(kind: str, prompt: Any, type_last: bool = False) -> dict[str, Any]:
    fields: dict[str, Any] = {"id": f"{kind}-1", "startTime": "2026-01-01T00:00:00Z", "input": prompt}
    return {**fields, "type": kind} if type_last else {"type": kind, **fields}


def _langfuse(*observations: dict[str, Any], padding: Mapping[str, str] = _PADDING) -> bytes:
    return orjson.dumps({"id": "t1", "observations": list(observations), **padding})


def _run(
    run_type: str, inputs: dict[str, Any], run_id: str = "r1", padding: Mapping[str, str] = _PADDING
) -> dict[str, Any]:
    return {
        "id": run_id,
        "trace_id": "t1",
        "run_type": run_type,
        "start_time": "2026-01-01T00:00:00",
        "inputs": inputs,
        **padding,
    }


def _read(format_name: str, raw: bytes) -> list[Any]:
    assert len(raw) > STREAM_FROM
    return parse_payload(ImportRequest("owner", format_name, raw, limits=SMALL))[1]


def test_langfuse_items_that_make_no_step_are_not_counted() -> None:
    # An unknown role, a blank text and a reasoning item make no step: 40 steps in all, under the limit of 50.
    prompt = [*_messages(40), *[{"role": "bogus", "content": "x"}, {"role": "user", "content": " "}] * _PADDED]

    traces = _read("langfuse", _langfuse(_observation("GENERATION", prompt)))

    assert len(traces[0].steps) == 40


def test_langfuse_messages_outside_a_generation_are_not_counted() -> None:
    span = _observation("SPAN", _messages(100))

    traces = _read("langfuse", _langfuse(span, {**_observation("GENERATION", _messages(2)), "id": "g2"}))

    assert len(traces[0].steps) == 2


def test_langfuse_observations_merged_by_id_are_counted_once() -> None:
    # Each generation is listed twice, as tRPC files and partial updates do: 40 spans, under the limit of 50.
    generations = [{**_observation("GENERATION", _messages(1)), "id": f"g{n % 40}"} for n in range(80)]

    traces = _read("langfuse", _langfuse(*generations))

    assert len(traces[0].spans) == 40


def test_langfuse_an_object_that_is_one_message_is_not_counted_as_its_messages() -> None:
    # {role, messages} is one message; only an envelope without a role is read as its `messages`.
    prompt = {"messages": _messages(_PADDED), "role": "user", "content": "hi"}

    traces = _read("langfuse", _langfuse(_observation("GENERATION", prompt)))

    assert [step.content for step in traces[0].steps] == ["hi"]


@pytest.mark.parametrize(
    "observation",
    [
        pytest.param(_observation("GENERATION", _messages(_PADDED), type_last=True), id="type-after-input"),
        pytest.param(_observation("GENERATION", {"messages": _messages(_PADDED)}), id="envelope"),
        pytest.param(_observation("GENERATION", [_messages(_PADDED)]), id="nested-list"),
    ],
)
def test_langfuse_a_generation_far_over_the_step_limit_is_refused_however_it_is_written(
    observation: dict[str, Any],
) -> None:
    raw = _langfuse(observation, padding={})
    tracemalloc.start()
    try:
        refusal = _refusal("langfuse", raw)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert refusal.field == "document: steps", str(refusal)
    assert peak < len(raw) // 2, f"{peak >> 20} MiB traced while refusing {len(raw) >> 20} MiB"


def test_langsmith_the_later_lists_of_a_batched_prompt_are_not_counted() -> None:
    # LangChain logs one message list per batched prompt; the first is the run's prompt.
    inputs = {"messages": [_messages(3), _messages(_PADDED)]}

    traces = _read("langsmith", orjson.dumps(_run("llm", inputs)))

    assert len(traces[0].steps) == 3


def test_langsmith_messages_outside_an_llm_run_are_not_counted() -> None:
    chain = _run("chain", {"messages": _messages(100)}, run_id="t1")
    llm = _run("llm", {"messages": _messages(2)}, run_id="r2")

    traces = _read("langsmith", orjson.dumps(chain) + b"\n" + orjson.dumps(llm))

    assert len(traces[0].steps) == 2


@pytest.mark.parametrize(
    "inputs",
    [
        pytest.param({"messages": [_messages(_PADDED)]}, id="batched"),
        pytest.param({"messages": _messages(_PADDED)}, id="plain"),
    ],
)
def test_langsmith_an_llm_run_far_over_the_step_limit_in_an_array_of_runs_is_refused(inputs: dict[str, Any]) -> None:
    raw = orjson.dumps([_run("llm", inputs, padding={})])
    tracemalloc.start()
    try:
        refusal = _refusal("langsmith", raw)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert refusal.field == "document: steps", str(refusal)
    assert peak < len(raw) // 2, f"{peak >> 20} MiB traced while refusing {len(raw) >> 20} MiB"
