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
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest

from stash_common.errors import InvalidArgument, ResourceExhausted
from stash_ingest.adapters.reading import STREAM_FROM
from stash_ingest.adapters.registry import get_adapter
from stash_ingest.imports import ImportRequest, parse_payload
from stash_ingest.limits import DEFAULT_LIMITS
from stash_ingest.otel.traces import build_trace
from stash_ingest.otlp import OtlpRequest, accept_spans, read_spans
from support.hostile import LONG_TRACE, MANY_TRACES, TRACE_ID, WIDE_TRACE, otlp_protobuf_span, otlp_protobuf_steps
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


def test_a_large_document_is_counted_before_it_is_parsed() -> None:
    # Over STREAM_FROM, the steps are counted by streaming: the broken JSON at the end is never reached.
    raw = LONG_TRACE["stash"](STREAM_FROM // 10)
    truncated = raw[: len(raw) // 2]
    assert len(truncated) > STREAM_FROM

    refusal = _refusal("stash", truncated)

    assert refusal.field == "line 1: steps"


_PEAK = """
import sys
from pathlib import Path
from typing import Any
sys.path.insert(0, {tests!r})
from support.hostile import LONG_TRACE
from stash_common.errors import InvalidArgument
from stash_ingest.adapters.registry import get_adapter
raw = LONG_TRACE[{format_name!r}](1_000_000)
Path("/proc/self/clear_refs").write_text("5")  # VmHWM starts again from the current RSS
def kib(field):
    return next(int(line.split()[1]) for line in Path("/proc/self/status").read_text().splitlines()
                if line.startswith(field))
before = kib("VmRSS:")
try:
    get_adapter({format_name!r}).parse(raw, __import__("stash_ingest.limits").limits.DEFAULT_LIMITS)
except InvalidArgument as error:
    print(error.field, len(raw) >> 20, (kib("VmHWM:") - before) // 1024, sep="|")
"""


def _refused_with_peak(format_name: str) -> tuple[str, int, int]:
    """Where a 1,000,000-step trace of this format was refused, its size and the refusing process's peak, in MiB."""
    tests = str(Path(__file__).parents[3] / "tests")
    script = _PEAK.format(tests=tests, format_name=format_name)
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
]


def _receive(raw: bytes, protobuf: bool) -> None:
    """What the OTLP receiver does before it touches the database: accept the spans, build each trace, check it."""
    request = OtlpRequest("owner", protobuf=raw) if protobuf else OtlpRequest("owner", json=raw)
    accepted, _ = accept_spans(read_spans(replace(request, limits=SMALL)), SMALL)
    for trace_id in {trace_id for trace_id, _ in accepted}:
        build_trace(trace_id, [span for key, span in accepted.items() if key[0] == trace_id], SMALL)


def _payload(source: str, kind: str) -> bytes:
    if source == "otlp_protobuf":
        return otlp_protobuf_steps(BIG)
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
    # (The OTLP protobuf body is decoded whole, a C++ message about twice its bytes: bounded by the body limit.)
    most = 3 * len(raw) if source == "otlp_protobuf" else len(raw) // 2
    assert peak < most, f"{peak >> 20} MiB traced while refusing {len(raw) >> 20} MiB"
