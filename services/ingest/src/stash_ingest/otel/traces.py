"""One canonical trace from all the span dicts of one trace id, however many requests brought them.

The trace is a pure function of its spans, so the live receiver rebuilds it from every stored span
after each request, and a file import of the same spans gives the same trace. It stays None while
the spans hold no message other than system messages: an agent's first spans (a workflow, a tool)
can arrive before its first LLM call.

Mapping. `external_id` = the trace id in lower-case hex (None when empty). Trace metadata:
`service_name`, `provider`, `model` (of the last LLM call recording them), `llm_calls`, and `usage`
totals (`input_tokens`, `output_tokens`, `cache_read_input_tokens`) over the LLM calls, each read
from the first key present across the conventions. Every span of the trace becomes a `Span`:
lower-case hex ids, `kind` = the instrumentation's own span type when recorded (OpenInference /
OpenLLMetry kind lower-cased, `gen_ai.operation.name` mapped to llm/tool/agent/embedding; "llm" for a
span that yielded messages), else the OTel SpanKind name (`client`, `internal`, …); `input`/`output` =
`input.value`/`output.value`, the gen_ai messages, `traceloop.entity.*` or the tool call's
arguments/result, JSON-decoded, cut to a text prefix above 16 KiB (spans are for the timeline; the
full messages are already steps); `step_indices` = the steps the span contributed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from stash_ingest.adapters.reading import decode_nested, to_json_text
from stash_ingest.limits import DEFAULT_LIMITS, TraceLimits, check_steps_read
from stash_ingest.otel.calls import Call, call_of
from stash_ingest.otel.conventions import genai, openinference, openllmetry
from stash_ingest.otel.history import merge_calls
from stash_ingest.otel.spans import SpanView, span_views, trace_where
from stash_ingest.otel.values import hex_id, int_value
from stash_ingest.traces import Span, Trace

MAX_VALUE_CHARS = 16_384
# Span types recorded by the instrumentation, most specific convention first.
SPAN_KIND_READERS: tuple[Callable[[Mapping[str, Any]], str | None], ...] = (
    openinference.span_kind,
    openllmetry.span_kind,
    genai.span_kind,
)
PROVIDER_KEYS = ("gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system")
MODEL_KEYS = ("gen_ai.response.model", "gen_ai.request.model", "llm.model_name")
USAGE_KEYS: Mapping[str, tuple[str, ...]] = {
    "input_tokens": ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt"),
    "output_tokens": ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.token_count.completion"),
    "cache_read_input_tokens": (
        "gen_ai.usage.cache_read.input_tokens",
        "gen_ai.usage.cache_read_input_tokens",
        "llm.token_count.prompt_details.cache_read",
    ),
}
INPUT_VALUE_KEYS = ("input.value", "gen_ai.input.messages", "traceloop.entity.input", "gen_ai.tool.call.arguments")
OUTPUT_VALUE_KEYS = ("output.value", "gen_ai.output.messages", "traceloop.entity.output", "gen_ai.tool.call.result")


def build_trace(
    trace_id: str, spans: Sequence[Mapping[str, Any]], limits: TraceLimits = DEFAULT_LIMITS
) -> Trace | None:
    """The trace made of all these span dicts of one trace; None while they hold no non-system LLM message.

    A call with more messages than the trace may hold steps is refused as it is read (`call_of`), the merged
    conversation as soon as it is merged."""
    trace_id = hex_id(trace_id, "trace id")
    views = span_views(trace_id, spans)
    where = trace_where(trace_id)
    calls = [call for view in views if (call := call_of(view, f"{where}: span {view.id}", where, limits))]
    steps, contributed = merge_calls(calls)
    check_steps_read(len(steps), trace_where(trace_id), limits)
    if all(step.role == "system" for step in steps):
        return None
    return Trace(
        steps=tuple(steps),
        external_id=trace_id or None,
        metadata=_trace_metadata(calls),
        spans=tuple(_canonical_span(view, contributed.get(view.id, ())) for view in views),
    )


def _trace_metadata(calls: Sequence[Call]) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    for call in calls:
        recorded = {
            "service_name": call.span.resource.get("service.name"),
            "provider": _first_text(call.span.attributes, PROVIDER_KEYS),
            "model": _first_text(call.span.attributes, MODEL_KEYS),
        }
        metadata.update({key: value for key, value in recorded.items() if isinstance(value, str) and value})
    usage = _usage_totals(calls)
    if usage:
        metadata["usage"] = usage
    metadata["llm_calls"] = len(calls)
    return metadata


def _usage_totals(calls: Sequence[Call]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for call in calls:
        for name, keys in USAGE_KEYS.items():
            count = _first_count(call.span.attributes, keys)
            if count is not None:
                totals[name] = totals.get(name, 0) + count
    return totals


def _first_count(attributes: Mapping[str, Any], keys: Sequence[str]) -> int | None:
    counts = (int_value(attributes.get(key)) for key in keys)
    return next((count for count in counts if isinstance(count, int) and not isinstance(count, bool)), None)


def _first_text(attributes: Mapping[str, Any], keys: Sequence[str]) -> str | None:
    return next((attributes[key] for key in keys if isinstance(attributes.get(key), str) and attributes[key]), None)


def _canonical_span(view: SpanView, step_indices: tuple[int, ...]) -> Span:
    return Span(
        id=view.id,
        name=view.name,
        start_ns=view.start_ns,
        end_ns=view.end_ns,
        parent_id=view.parent_id,
        kind=_semantic_kind(view, bool(step_indices)),
        input=_span_value(view.attributes, INPUT_VALUE_KEYS),
        output=_span_value(view.attributes, OUTPUT_VALUE_KEYS),
        step_indices=step_indices,
    )


def _semantic_kind(view: SpanView, is_call: bool) -> str | None:
    recorded = next((kind for read in SPAN_KIND_READERS if (kind := read(view.attributes))), None)
    if recorded:
        return recorded
    return "llm" if is_call else view.kind


def _span_value(attributes: Mapping[str, Any], keys: Sequence[str]) -> Any:
    value = next((attributes[key] for key in keys if attributes.get(key) not in (None, "")), None)
    if value is None:
        return None
    decoded = decode_nested(value)
    text = to_json_text(decoded)
    if len(text) > MAX_VALUE_CHARS:
        return f"{text[:MAX_VALUE_CHARS]}… [truncated, {len(text)} characters]"
    return decoded
