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

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from stash_common.errors import InvalidArgument
from stash_ingest.adapters.reading import as_object, decode_nested, read_records, to_json_text
from stash_ingest.traces import Span, Step, Trace, validate_trace

_ROLES = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "model": "assistant",
    "tool": "tool",
    "function": "tool",
}
_TRACE_FIELDS = (
    ("name", "trace_name"),
    ("userId", "user_id"),
    ("sessionId", "session_id"),
    ("tags", "tags"),
    ("release", "release"),
    ("version", "version"),
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EXPECTED = "expected a Langfuse trace with an `observations` list (GET /api/public/traces/{traceId})"


def parse_langfuse(raw: bytes) -> list[Trace]:
    """Parse Langfuse traces (one object, a JSON array or JSONL of them) into validated traces."""
    records = read_records(raw)
    if not records:
        raise InvalidArgument("payload", f"is empty; {_EXPECTED}")
    return [_read_trace(value, where) for where, value in records]


def looks_like_langfuse(value: Any) -> bool:
    """True for a trace object with `observations`, or a `{trace, observations}` download."""
    if not isinstance(value, dict):
        return False
    trace = value.get("trace")
    nested = isinstance(trace, dict) and isinstance(trace.get("observations"), list)
    return isinstance(value.get("observations"), list) or nested


def _read_trace(value: Any, where: str) -> Trace:
    if not looks_like_langfuse(value):
        raise InvalidArgument(f"{where}: observations", _EXPECTED)
    header = value["trace"] if isinstance(value.get("trace"), dict) else value
    observations = sorted(_observations(value, header, where), key=_start_order)
    steps, contributed = _walk(observations)
    if not steps:
        raise InvalidArgument(
            f"{where}: observations", "no GENERATION observation has a usable input or output message"
        )
    trace = Trace(
        steps=tuple(steps),
        external_id=_text(header.get("id")) or _first_trace_id(observations),
        title=_text(header.get("name")),
        metadata=_trace_metadata(header, observations),
        spans=_spans(observations, contributed),
    )
    validate_trace(trace, where)
    return trace


def _observations(value: dict[str, Any], header: dict[str, Any], where: str) -> list[dict[str, Any]]:
    """The observations by id; tRPC files list light ones in the trace and full ones beside it."""
    sources = (
        [header.get("observations"), value.get("observations")] if header is not value else [header["observations"]]
    )
    merged: dict[str, dict[str, Any]] = {}
    for source in sources:
        for index, observation in enumerate(source if isinstance(source, list) else []):
            if not isinstance(observation, dict):
                raise InvalidArgument(f"{where}: observations[{index}]", "must be an object (a Langfuse observation)")
            key = _text(observation.get("id")) or f"#{len(merged)}"
            merged[key] = {**merged.get(key, {}), **observation}
    return list(merged.values())


def _start_order(observation: dict[str, Any]) -> tuple[bool, int]:
    start = _ns(observation.get("startTime"))
    return start is None, start or 0


# --- the conversation --------------------------------------------------------------------------


class _History:
    """The merged conversation, plus a trie of every call's messages to find what a call repeats."""

    def __init__(self) -> None:
        self.steps: list[Step] = []
        self._trie: dict[tuple[int, tuple[Any, ...]], int] = {}

    def add_call(self, inputs: list[Step], outputs: list[Step]) -> tuple[int, ...]:
        """Append the input beyond the longest known history, then the output; the new step indices."""
        known = self._known(inputs)
        node = 0
        for step in [*inputs, *outputs]:
            node = self._trie.setdefault((node, _key(step)), len(self._trie) + 1)
        return self.add_steps([*inputs[known:], *outputs])

    def add_steps(self, steps: list[Step]) -> tuple[int, ...]:
        """Append steps as they are; the new step indices."""
        start = len(self.steps)
        self.steps.extend(steps)
        return tuple(range(start, len(self.steps)))

    def _known(self, steps: list[Step]) -> int:
        node = 0
        for depth, step in enumerate(steps):
            child = self._trie.get((node, _key(step)))
            if child is None:
                return depth
            node = child
        return len(steps)


def _key(step: Step) -> tuple[Any, ...]:
    # Timestamps differ between the call that produced a message and the calls that resend it,
    # and a resent tool result may lack the tool name, so neither takes part in the comparison.
    tool_input = None if step.tool_input is None else to_json_text(step.tool_input)
    tool_name = step.tool_name if step.role == "assistant" else None
    return step.role, step.content.strip(), tool_name, step.tool_call_id, tool_input


def _walk(observations: list[dict[str, Any]]) -> tuple[list[Step], dict[int, tuple[int, ...]]]:
    """The merged steps, and for each observation (by position) the steps it contributed."""
    calls = {index: _call_steps(obs) for index, obs in enumerate(observations) if _kind(obs) == "generation"}
    answered = {step.tool_call_id for pair in calls.values() for step in (*pair[0], *pair[1]) if step.role == "tool"}
    history = _History()
    contributed: dict[int, tuple[int, ...]] = {}
    for index, observation in enumerate(observations):
        if index in calls:
            contributed[index] = history.add_call(*calls[index])
        elif _kind(observation) == "tool":
            result = _tool_observation_result(observation, history.steps, answered)
            if result is not None:
                answered.add(result.tool_call_id)
                contributed[index] = history.add_steps([result])
    return _name_tool_results(history.steps), contributed


def _call_steps(observation: dict[str, Any]) -> tuple[list[Step], list[Step]]:
    """A generation's input and output as steps, stamped with the call's start and end."""
    inputs = _steps(observation.get("input"), "user")
    instructions = _instructions(observation)
    if instructions and not (inputs and inputs[0].role == "system"):
        inputs.insert(0, Step("system", instructions))
    outputs = _steps(observation.get("output"), "assistant")
    ended = observation.get("endTime") or observation.get("startTime")
    return _stamp(inputs, observation.get("startTime")), _stamp(outputs, ended)


def _instructions(observation: dict[str, Any]) -> str | None:
    # The OpenAI Agents SDK logs the Responses API's system prompt only in the response object.
    for source in (decode_nested(observation.get("output")), observation.get("modelParameters")):
        if isinstance(source, dict) and isinstance(source.get("instructions"), str) and source["instructions"].strip():
            return source["instructions"]
    return None


def _tool_observation_result(observation: dict[str, Any], steps: list[Step], answered: set[str | None]) -> Step | None:
    """A tool step from a TOOL observation, when it runs a call that nothing else answers."""
    attributes = _attributes(observation)
    call_id = _text(attributes.get("gen_ai.tool.call.id"))
    name = _text(attributes.get("gen_ai.tool.name")) or _text(observation.get("name"))
    pending = [
        step
        for step in steps
        if step.role == "assistant" and step.tool_call_id and step.tool_call_id not in answered
        if (step.tool_call_id == call_id if call_id else step.tool_name == name)
    ]
    call = _pick_call(pending, decode_nested(observation.get("input")))
    if call is None:
        return None
    output = decode_nested(observation.get("output"))
    is_error = observation.get("level") == "ERROR" or (isinstance(output, dict) and output.get("isError") is True)
    result = _result(call.tool_call_id, call.tool_name, output, is_error)
    return _stamp([result], observation.get("endTime") or observation.get("startTime"))[0]


def _pick_call(pending: list[Step], tool_input: Any) -> Step | None:
    matching = [step for step in pending if tool_input in (step.tool_input, {"input": step.tool_input})]
    if matching:
        return matching[0]
    return pending[0] if len(pending) == 1 else None


def _name_tool_results(steps: list[Step]) -> list[Step]:
    names = {step.tool_call_id: step.tool_name for step in steps if step.role == "assistant" and step.tool_name}
    return [
        replace(step, tool_name=names[step.tool_call_id])
        if step.role == "tool" and step.tool_name is None and step.tool_call_id in names
        else step
        for step in steps
    ]


# --- messages in the shapes frameworks log ------------------------------------------------------


@dataclass
class _Parts:
    """One message's content, sorted by what becomes of it."""

    texts: list[str] = field(default_factory=list)
    calls: list[Step] = field(default_factory=list)
    results: list[Step] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)


def _steps(value: Any, role: str) -> list[Step]:
    """Steps from an input or output value; `role` is for bare strings. Unusable items are skipped."""
    steps: list[Step] = []
    reasoning: list[str] = []
    for item in _items(decode_nested(value), role):
        produced, thoughts = _item_steps(item)
        reasoning.extend(thoughts)
        if produced and reasoning:
            produced[0] = replace(produced[0], metadata={**produced[0].metadata, "reasoning": "\n".join(reasoning)})
            reasoning = []
        steps.extend(produced)
    return steps


def _items(value: Any, role: str) -> list[dict[str, Any]]:
    """Message-like objects from a string, a list (flattened) or an envelope object."""
    if isinstance(value, str):
        return [{"role": role, "content": value}] if value.strip() else []
    if isinstance(value, list):
        return [item for entry in value for item in _items(decode_nested(entry), role)]
    if not isinstance(value, dict):
        return []
    if "role" in value or "parts" in value or isinstance(value.get("type"), str):
        return [value]
    if isinstance(value.get("choices"), list):
        return _items([choice.get("message") for choice in value["choices"][:1] if isinstance(choice, dict)], role)
    if value.get("object") == "response":
        return _items(value.get("output"), role)
    for key in ("messages", "input", "output"):
        if key in value:
            system = value.get("system", value.get("instructions"))
            prompt = [{"role": "system", "content": system}] if isinstance(system, str | list) and system else []
            return prompt + _items(value[key], role)
    return []


def _item_steps(item: dict[str, Any]) -> tuple[list[Step], list[str]]:
    """The steps of one item, and reasoning text that belongs to the first step it (or a later item) makes."""
    kind = item.get("type")
    if kind in ("function_call", "custom_tool_call"):
        call = _call(item.get("call_id") or item.get("id"), item.get("name"), item.get("arguments", item.get("input")))
        return ([call] if call else []), []
    if kind in ("function_call_output", "custom_tool_call_output"):
        return [_result(item.get("call_id"), None, item.get("output"), False)], []
    if kind == "reasoning" and "role" not in item:
        return [], _texts(item.get("summary")) + _texts(item.get("content"))
    role = _ROLES.get(item["role"].lower()) if isinstance(item.get("role"), str) else None
    if role is None:
        return [], []
    if role == "tool":
        return [_result(item.get("tool_call_id"), item.get("name"), item.get("content"), False)], []
    parts = _parts(item)
    return _message_steps(role, parts), parts.reasoning


def _parts(item: dict[str, Any]) -> _Parts:
    parts = _Parts()
    content = item["parts"] if isinstance(item.get("parts"), list) else item.get("content")
    for block in content if isinstance(content, list) else [content]:
        if isinstance(block, str):
            parts.texts.append(block)
        elif isinstance(block, dict) and isinstance(block.get("type"), str) and block["type"] in _BLOCKS:
            _BLOCKS[block["type"]](parts, block)
    for entry in item.get("tool_calls") if isinstance(item.get("tool_calls"), list) else []:
        function = entry.get("function") if isinstance(entry, dict) else None
        if isinstance(function, dict):
            parts.calls.extend(_maybe(_call(entry.get("id"), function.get("name"), function.get("arguments"))))
    if isinstance(item.get("function_call"), dict):
        legacy = item["function_call"]
        parts.calls.extend(_maybe(_call(None, legacy.get("name"), legacy.get("arguments"))))
    return parts


def _message_steps(role: str, parts: _Parts) -> list[Step]:
    """Text first for an assistant (then its calls); tool results first for a user turn."""
    text = "\n".join(piece for piece in parts.texts if piece)
    message = [Step(role, text)] if text.strip() else []
    if role == "assistant":
        return [*message, *parts.calls, *parts.results]
    return [*parts.results, *message, *parts.calls]


def _add_text(parts: _Parts, block: dict[str, Any]) -> None:
    text = block.get("text", block.get("content", block.get("refusal")))
    if isinstance(text, str):
        parts.texts.append(text)


def _add_call(parts: _Parts, block: dict[str, Any]) -> None:
    parts.calls.extend(_maybe(_call(block.get("id"), block.get("name"), block.get("input", block.get("arguments")))))


def _add_result(parts: _Parts, block: dict[str, Any]) -> None:
    call_id = block.get("tool_use_id", block.get("id"))
    output = next((block[key] for key in ("content", "response", "result") if key in block), None)
    parts.results.append(_result(call_id, block.get("name"), output, block.get("is_error") is True))


def _add_reasoning(parts: _Parts, block: dict[str, Any]) -> None:
    text = block.get("thinking", block.get("content", block.get("text")))
    parts.reasoning.extend(_texts(block.get("summary")) if text is None else _texts(text))


def _add_image(parts: _Parts, block: dict[str, Any]) -> None:
    if block.get("type") in ("blob", "uri") and block.get("modality") != "image":
        return
    parts.texts.append(_image_text(block))


_BLOCKS: dict[str, Callable[[_Parts, dict[str, Any]], None]] = {
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


def _image_text(block: dict[str, Any]) -> str:
    """An image's place in text: its http(s) URL when it has one, never a data URL."""
    url = block.get("image_url", block.get("uri"))
    if isinstance(url, dict):
        url = url.get("url")
    source = block.get("source")
    if isinstance(source, dict) and source.get("type") == "url":
        url = source.get("url")
    return f"[image: {url}]" if isinstance(url, str) and url.startswith(("http://", "https://")) else "[image]"


def _call(call_id: Any, name: Any, arguments: Any) -> Step | None:
    if not isinstance(name, str) or not name:
        return None
    return Step("assistant", "", tool_name=name, tool_input=as_object(arguments), tool_call_id=_text(call_id))


def _result(call_id: Any, name: Any, output: Any, is_error: bool) -> Step:
    metadata = {"is_error": True} if is_error else {}
    return Step("tool", _result_text(output), tool_name=_text(name), tool_call_id=_text(call_id), metadata=metadata)


def _result_text(value: Any) -> str:
    """A tool result as text: strings as they are, block lists (and MCP `{content}`) joined, objects as JSON."""
    if isinstance(value, dict) and isinstance(value.get("content"), list) and "role" not in value:
        value = value["content"]
    if isinstance(value, list):
        return "\n".join(_block_text(block) for block in value)
    if value is None:
        return ""
    return to_json_text(value)


def _block_text(block: Any) -> str:
    if isinstance(block, dict) and block.get("type") in ("text", "input_text", "output_text"):
        return str(block.get("text", ""))
    if isinstance(block, dict) and block.get("type") in ("image", "image_url", "input_image"):
        return _image_text(block)
    return to_json_text(block)


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, list):
        return [text for entry in value for text in _texts(entry.get("text") if isinstance(entry, dict) else entry)]
    return []


def _maybe(step: Step | None) -> list[Step]:
    return [] if step is None else [step]


# --- trace facts and spans ---------------------------------------------------------------------


def _trace_metadata(header: dict[str, Any], observations: list[dict[str, Any]]) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        key: header[name] for name, key in _TRACE_FIELDS if header.get(name) not in (None, "", [])
    }
    if header.get("environment") not in (None, "", "default"):
        metadata["environment"] = header["environment"]
    generations = [obs for obs in observations if _kind(obs) == "generation"]
    models = list(dict.fromkeys(obs["model"] for obs in generations if _text(obs.get("model"))))
    if models:
        metadata["model"] = models[0]
    if len(models) > 1:
        metadata["models"] = models
    usage = _usage(generations)
    if usage:
        metadata["usage"] = usage
    recorded = header.get("scores") if isinstance(header.get("scores"), list) else []
    scores = [_score(score) for score in recorded if isinstance(score, dict) and _text(score.get("name"))]
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
    span_id = _text(observation.get("id"))
    start = _ns(observation.get("startTime"))
    if span_id is None or start is None:
        return None
    kind = _kind(observation)
    return Span(
        id=span_id,
        name=_text(observation.get("name")) or kind or "observation",
        start_ns=start,
        end_ns=max(start, _ns(observation.get("endTime")) or start),
        parent_id=_text(observation.get("parentObservationId")),
        kind=kind,
        # A generation's input is the whole history again; the steps already hold it.
        input=None if kind == "generation" else decode_nested(observation.get("input")),
        output=decode_nested(observation.get("output")),
        step_indices=step_indices,
    )


def _first_trace_id(observations: Iterable[dict[str, Any]]) -> str | None:
    return next((_text(obs.get("traceId")) for obs in observations if _text(obs.get("traceId"))), None)


def _attributes(observation: dict[str, Any]) -> dict[str, Any]:
    metadata = decode_nested(observation.get("metadata"))
    attributes = metadata.get("attributes") if isinstance(metadata, dict) else None
    return attributes if isinstance(attributes, dict) else {}


def _kind(observation: dict[str, Any]) -> str | None:
    kind = observation.get("type")
    return kind.lower() if isinstance(kind, str) and kind else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


# --- time --------------------------------------------------------------------------------------


def _moment(value: Any) -> datetime | None:
    """ISO-8601 (`Z`, offset or naive UTC) or epoch milliseconds, in UTC."""
    try:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return _EPOCH + timedelta(milliseconds=value)
        moment = datetime.fromisoformat(value) if isinstance(value, str) else None
        if moment is None:
            return None
        return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    except (ValueError, OverflowError):
        return None


def _ns(value: Any) -> int | None:
    moment = _moment(value)
    return None if moment is None else (moment - _EPOCH) // timedelta(microseconds=1) * 1000


def _stamp(steps: list[Step], value: Any) -> list[Step]:
    moment = _moment(value)
    if moment is None:
        return steps
    timestamp = moment.isoformat(timespec="microseconds")
    return [replace(step, metadata={**step.metadata, "timestamp": timestamp}) for step in steps]
