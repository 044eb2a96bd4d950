"""Langfuse traces: the public `GET /api/public/traces/{id}` body, tRPC downloads and UI downloads.

A trace is rebuilt from its GENERATION observations in start order. Each LLM call logs the whole
history it was sent, so the calls are prefix-merged: a call adds the input messages beyond the
longest history already seen (any earlier call's input plus output), then its output. That keeps
a second agent's fresh conversation in the same trace without repeating the first one.

Observation fields come as objects (UI download) or JSON text, sometimes encoded twice (tRPC),
and hold whatever the framework sent: OpenAI chat messages, Responses-API items, OTel GenAI
`parts` messages or Anthropic content blocks. Items without a usable role or type are skipped.
TOOL observations are read only to answer a tool call that no LLM call's input answers (the
Claude Agent SDK logs results nowhere else); every observation becomes a span.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from stash_common.errors import InvalidArgument
from stash_ingest.adapters.messages import (
    ROLES,
    BlockReader,
    Call,
    Parts,
    attach_reasoning,
    call_steps,
    collect_texts,
    find_call,
    image_text,
    merge_calls,
    message_steps,
    read_parts,
    result_step,
    result_text,
    stamp_steps,
)
from stash_ingest.adapters.prompts import Prompts
from stash_ingest.adapters.reading import Counted, decode_nested, epoch_ns, list_or_empty, nonblank, read_records
from stash_ingest.limits import DEFAULT_LIMITS, TraceLimits, TraceReader, check_records, check_spans_read
from stash_ingest.traces import Span, Step, Trace

_ROLES = {**ROLES, "model": "assistant"}  # Gemini's name for the assistant
_TRACE_FIELDS = (
    ("name", "trace_name"),
    ("userId", "user_id"),
    ("sessionId", "session_id"),
    ("tags", "tags"),
    ("release", "release"),
    ("version", "version"),
)
_URL_KEY = "uri"  # where OTel GenAI parts put an image's address
_EXPECTED = "expected a Langfuse trace with an `observations` list (GET /api/public/traces/{traceId})"

# A generation's input, a list of messages or an envelope object holding them, is counted by streaming: all of
# its steps end up in its trace; so is every observation, a span. tRPC files list light observations in the
# trace and the full ones beside it, so one path counts them all.
PROMPTS = Prompts(
    is_call=lambda observation: _kind(observation) == "generation",
    lists={"input": None, "input.messages": lambda envelope: _shape(envelope) == "envelope"},
    steps=lambda message: sum(len(_item_steps(item)[0]) for item in _items(decode_nested(message), "user")),
    nested="flatten",
    spans=True,
)
COUNTED: Counted = {
    "observations.item": PROMPTS,
    "item": "traces",
    "item.observations.item": PROMPTS,
}


def parse_langfuse(raw: bytes, limits: TraceLimits = DEFAULT_LIMITS) -> list[Trace]:
    """Parse Langfuse traces (one object, a JSON array or JSONL of them) into validated traces."""
    records = read_records(raw, COUNTED, limits)
    if not records:
        raise InvalidArgument("payload", f"is empty; {_EXPECTED}")
    check_records(len(records), limits)
    reader = TraceReader(limits)
    for where, value in records:
        reader.add(_read_trace(value, where, limits), where)
    return reader.traces


def looks_like_langfuse(value: Any) -> bool:
    """True for a trace object with `observations`, or a `{trace, observations}` download."""
    if not isinstance(value, dict):
        return False
    trace = value.get("trace")
    nested = isinstance(trace, dict) and isinstance(trace.get("observations"), list)
    return isinstance(value.get("observations"), list) or nested


def _read_trace(value: Any, where: str, limits: TraceLimits) -> Trace:
    if not looks_like_langfuse(value):
        raise InvalidArgument(f"{where}: observations", _EXPECTED)
    header = value["trace"] if isinstance(value.get("trace"), dict) else value
    observations = sorted(_observations(value, header, where, limits), key=_start_order)
    steps, contributed = _walk(observations, where, limits)
    if not steps:
        raise InvalidArgument(
            f"{where}: observations", "no GENERATION observation has a usable input or output message"
        )
    return Trace(
        steps=tuple(steps),
        external_id=nonblank(header.get("id")) or _first_trace_id(observations),
        title=nonblank(header.get("name")),
        metadata=_trace_metadata(header, observations),
        spans=_spans(observations, contributed),
    )


def _observations(
    value: dict[str, Any], header: dict[str, Any], where: str, limits: TraceLimits
) -> list[dict[str, Any]]:
    """The observations by id; tRPC files list light ones in the trace and full ones beside it. Each becomes a
    span, so more of them than a trace may hold spans stop the reading."""
    sources = (
        [header.get("observations"), value.get("observations")] if header is not value else [header["observations"]]
    )
    merged: dict[str, dict[str, Any]] = {}
    for source in sources:
        for index, observation in enumerate(source if isinstance(source, list) else []):
            if not isinstance(observation, dict):
                raise InvalidArgument(f"{where}: observations[{index}]", "must be an object (a Langfuse observation)")
            key = nonblank(observation.get("id")) or f"#{len(merged)}"
            merged[key] = {**merged.get(key, {}), **observation}
            check_spans_read(len(merged), where, limits)
    return list(merged.values())


def _start_order(observation: dict[str, Any]) -> tuple[bool, int]:
    start = epoch_ns(observation.get("startTime"))
    return start is None, start or 0


# --- the conversation --------------------------------------------------------------------------


def _walk(
    observations: list[dict[str, Any]], where: str, limits: TraceLimits
) -> tuple[list[Step], dict[int, tuple[int, ...]]]:
    """The merged steps, and for each observation (by position) the steps it contributed."""
    calls = {
        index: _call_steps(obs, where, limits) for index, obs in enumerate(observations) if _kind(obs) == "generation"
    }
    tools = {index: obs for index, obs in enumerate(observations) if _kind(obs) == "tool"}
    return merge_calls(calls, tools, _tool_observation_result)


def _call_steps(observation: dict[str, Any], where: str, limits: TraceLimits) -> Call:
    """A generation's input and output as steps, stamped with the call's start and end."""
    inputs = _steps(observation.get("input"), "user", where, limits)
    instructions = _instructions(observation)
    if instructions and not (inputs and inputs[0].role == "system"):
        inputs.insert(0, Step("system", instructions))
    outputs = _steps(observation.get("output"), "assistant", where, limits)
    ended = observation.get("endTime") or observation.get("startTime")
    return stamp_steps(inputs, observation.get("startTime")), stamp_steps(outputs, ended)


def _instructions(observation: dict[str, Any]) -> str | None:
    # The OpenAI Agents SDK logs the Responses API's system prompt only in the response object.
    for source in (decode_nested(observation.get("output")), observation.get("modelParameters")):
        if isinstance(source, dict) and isinstance(source.get("instructions"), str) and source["instructions"].strip():
            return source["instructions"]
    return None


def _tool_observation_result(observation: dict[str, Any], steps: list[Step], answered: set[str | None]) -> Step | None:
    """A tool step from a TOOL observation, when it runs a call that nothing else answers."""
    attributes = _attributes(observation)
    call_id = nonblank(attributes.get("gen_ai.tool.call.id"))
    name = nonblank(attributes.get("gen_ai.tool.name")) or nonblank(observation.get("name"))
    call = find_call(steps, answered, call_id, name, decode_nested(observation.get("input")))
    if call is None:
        return None
    output = decode_nested(observation.get("output"))
    is_error = observation.get("level") == "ERROR" or (isinstance(output, dict) and output.get("isError") is True)
    result = _result(call.tool_call_id, call.tool_name, output, is_error)
    return stamp_steps([result], observation.get("endTime") or observation.get("startTime"))[0]


# --- messages in the shapes frameworks log ------------------------------------------------------


def _steps(value: Any, role: str, where: str, limits: TraceLimits) -> list[Step]:
    """Steps from an input or output value; `role` is for bare strings. Unusable items are skipped."""
    return attach_reasoning((_item_steps(item) for item in _items(decode_nested(value), role)), where, limits)


def _items(value: Any, role: str) -> Iterator[dict[str, Any]]:
    """Message-like objects from a string, a list (flattened) or an envelope object, one at a time."""
    if isinstance(value, str):
        if value.strip():
            yield {"role": role, "content": value}
    elif isinstance(value, list):
        for entry in value:
            yield from _items(decode_nested(entry), role)
    elif isinstance(value, dict):
        yield from _object_items(value, role)


def _shape(value: Mapping[str, Any]) -> str:
    """What an object among a generation's messages is: a message, a chat completion, a Responses-API response,
    or an envelope holding messages (`messages`, `input` or `output`)."""
    if "role" in value or "parts" in value or isinstance(value.get("type"), str):
        return "message"
    if isinstance(value.get("choices"), list):
        return "completion"
    return "response" if value.get("object") == "response" else "envelope"


def _object_items(value: dict[str, Any], role: str) -> Iterator[dict[str, Any]]:
    shape = _shape(value)
    if shape == "message":
        yield value
    elif shape == "completion":
        yield from _items([choice.get("message") for choice in value["choices"][:1] if isinstance(choice, dict)], role)
    elif shape == "response":
        yield from _items(value.get("output"), role)
    else:
        key = next((key for key in ("messages", "input", "output") if key in value), None)
        if key is not None:
            system = value.get("system", value.get("instructions"))
            if isinstance(system, str | list) and system:
                yield {"role": "system", "content": system}
            yield from _items(value[key], role)


def _item_steps(item: dict[str, Any]) -> tuple[list[Step], list[str]]:
    """The steps of one item, and reasoning text that belongs to the first step it (or a later item) makes."""
    kind = item.get("type")
    if kind in ("function_call", "custom_tool_call"):
        call_id, arguments = item.get("call_id") or item.get("id"), item.get("arguments", item.get("input"))
        return call_steps(call_id, item.get("name"), arguments), []
    if kind in ("function_call_output", "custom_tool_call_output"):
        return [_result(item.get("call_id"), None, item.get("output"), False)], []
    if kind == "reasoning" and "role" not in item:
        return [], collect_texts(item.get("summary")) + collect_texts(item.get("content"))
    role = _ROLES.get(item["role"].lower()) if isinstance(item.get("role"), str) else None
    if role is None:
        return [], []
    if role == "tool":
        return [_result(item.get("tool_call_id"), item.get("name"), item.get("content"), False)], []
    parts = _parts(item)
    return message_steps(role, parts), parts.reasoning


def _parts(item: dict[str, Any]) -> Parts:
    parts = read_parts(item["parts"] if isinstance(item.get("parts"), list) else item.get("content"), _BLOCKS)
    for entry in list_or_empty(item.get("tool_calls")):
        function = entry.get("function") if isinstance(entry, dict) else None
        if isinstance(function, dict):
            parts.calls.extend(call_steps(entry.get("id"), function.get("name"), function.get("arguments")))
    if isinstance(item.get("function_call"), dict):
        legacy = item["function_call"]
        parts.calls.extend(call_steps(None, legacy.get("name"), legacy.get("arguments")))
    return parts


def _add_text(parts: Parts, block: dict[str, Any]) -> None:
    text = block.get("text", block.get("content", block.get("refusal")))
    if isinstance(text, str):
        parts.texts.append(text)


def _add_call(parts: Parts, block: dict[str, Any]) -> None:
    parts.calls.extend(call_steps(block.get("id"), block.get("name"), block.get("input", block.get("arguments"))))


def _add_result(parts: Parts, block: dict[str, Any]) -> None:
    call_id = block.get("tool_use_id", block.get("id"))
    output = next((block[key] for key in ("content", "response", "result") if key in block), None)
    parts.results.append(_result(call_id, block.get("name"), output, block.get("is_error") is True))


def _add_reasoning(parts: Parts, block: dict[str, Any]) -> None:
    text = block.get("thinking", block.get("content", block.get("text")))
    parts.reasoning.extend(collect_texts(block.get("summary")) if text is None else collect_texts(text))


def _add_image(parts: Parts, block: dict[str, Any]) -> None:
    if block.get("type") in ("blob", "uri") and block.get("modality") != "image":
        return
    parts.texts.append(image_text(block, _URL_KEY))


_BLOCKS: dict[str, BlockReader] = {
    "text": _add_text,
    "input_text": _add_text,
    "output_text": _add_text,
    "refusal": _add_text,
    "tool_use": _add_call,
    "tool_call": _add_call,
    "tool_result": _add_result,
    "tool_call_response": _add_result,
    "thinking": _add_reasoning,
    "reasoning": _add_reasoning,
    "image": _add_image,
    "image_url": _add_image,
    "input_image": _add_image,
    "blob": _add_image,
    "uri": _add_image,
}


def _result(call_id: Any, name: Any, output: Any, is_error: bool) -> Step:
    return result_step(call_id, name, _result_text(output), is_error)


def _result_text(value: Any) -> str:
    """A tool result as text, MCP's `{content: [blocks]}` read as its blocks."""
    if isinstance(value, dict) and isinstance(value.get("content"), list) and "role" not in value:
        value = value["content"]
    return result_text(value, _URL_KEY)


# --- trace facts and spans ---------------------------------------------------------------------


def _trace_metadata(header: dict[str, Any], observations: list[dict[str, Any]]) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        key: header[name] for name, key in _TRACE_FIELDS if header.get(name) not in (None, "", [])
    }
    if header.get("environment") not in (None, "", "default"):
        metadata["environment"] = header["environment"]
    generations = [obs for obs in observations if _kind(obs) == "generation"]
    models = list(dict.fromkeys(obs["model"] for obs in generations if nonblank(obs.get("model"))))
    if models:
        metadata["model"] = models[0]
    if len(models) > 1:
        metadata["models"] = models
    usage = _usage(generations)
    if usage:
        metadata["usage"] = usage
    recorded = list_or_empty(header.get("scores"))
    scores = [_score(score) for score in recorded if isinstance(score, dict) and nonblank(score.get("name"))]
    if scores:
        metadata["scores"] = scores
    return metadata


def _usage(generations: list[dict[str, Any]]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for observation in generations:
        details = observation.get("usageDetails") or observation.get("usage")
        for name, key in (("input", "input_tokens"), ("output", "output_tokens"), ("total", "total_tokens")):
            count = details.get(name) if isinstance(details, dict) else None
            if isinstance(count, int) and not isinstance(count, bool):
                totals[key] = totals.get(key, 0) + count
    return totals


def _score(score: dict[str, Any]) -> dict[str, Any]:
    value = score.get("value") if score.get("value") is not None else score.get("stringValue")
    return {
        key: item
        for key, item in (("name", score["name"]), ("value", value), ("source", score.get("source")))
        if item is not None
    }


def _spans(observations: list[dict[str, Any]], contributed: dict[int, tuple[int, ...]]) -> tuple[Span, ...]:
    spans = (_span(obs, contributed.get(index, ())) for index, obs in enumerate(observations))
    return tuple(span for span in spans if span is not None)


def _span(observation: dict[str, Any], step_indices: tuple[int, ...]) -> Span | None:
    """One observation as a span; untimed or id-less observations have none."""
    span_id = nonblank(observation.get("id"))
    start = epoch_ns(observation.get("startTime"))
    if span_id is None or start is None:
        return None
    kind = _kind(observation)
    return Span(
        id=span_id,
        name=nonblank(observation.get("name")) or kind or "observation",
        start_ns=start,
        end_ns=max(start, epoch_ns(observation.get("endTime")) or start),
        parent_id=nonblank(observation.get("parentObservationId")),
        kind=kind,
        # A generation's input is the whole history again; the steps already hold it.
        input=None if kind == "generation" else decode_nested(observation.get("input")),
        output=decode_nested(observation.get("output")),
        step_indices=step_indices,
    )


def _first_trace_id(observations: Iterable[dict[str, Any]]) -> str | None:
    return next((nonblank(obs.get("traceId")) for obs in observations if nonblank(obs.get("traceId"))), None)


def _attributes(observation: dict[str, Any]) -> dict[str, Any]:
    metadata = decode_nested(observation.get("metadata"))
    attributes = metadata.get("attributes") if isinstance(metadata, dict) else None
    return attributes if isinstance(attributes, dict) else {}


def _kind(observation: Mapping[str, Any]) -> str | None:
    kind = observation.get("type")
    return kind.lower() if isinstance(kind, str) and kind else None
