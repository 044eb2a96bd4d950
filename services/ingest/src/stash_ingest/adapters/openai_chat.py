"""OpenAI Chat Completions messages: fine-tuning JSONL, request bodies, bare message arrays and responses.

Accepted units: a `{"messages": [...], "tools"?, "parallel_tool_calls"?}` object per line (the
fine-tuning format, which is also the request body), a JSON array of messages (one trace), and a
response `{"choices": [...]}` (one trace of assistant steps per choice). Tool-call `arguments` are
JSON text, sometimes encoded twice (the cookbook's drone file); legacy `function_call` and
`role: "function"` are read as tool calls and results; `developer` is the newer name for `system`.
A recorded request or fine-tuning line may carry a string `id` (not part of OpenAI's body): it becomes
the trace's external id, so importing the same file again updates those traces instead of adding copies,
as a response's `id` does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stash_common.errors import InvalidArgument
from stash_ingest.adapters.messages import media_text, with_metadata
from stash_ingest.adapters.reading import (
    Counted,
    Record,
    Records,
    as_object,
    json_type,
    read_records,
    text_or_none,
    timestamp_metadata,
    to_json_text,
)
from stash_ingest.limits import DEFAULT_LIMITS, TraceLimits, TraceReader, check_records, check_steps_read
from stash_ingest.traces import Step, Trace

ANTHROPIC_BLOCK_TYPES = frozenset({"image", "tool_use", "tool_result", "thinking", "redacted_thinking", "document"})

ToolNames = dict[str, str]  # tool_call_id → tool name, so a result can name the tool it answers

COUNTED: Counted = {"messages.item.role": "steps"}  # every message is at least one step


def parse_openai_chat(raw: bytes, limits: TraceLimits = DEFAULT_LIMITS) -> list[Trace]:
    """Parse chat-completions messages (JSONL lines, a message array, a request or a response) into traces."""
    units = _units(raw, limits)
    if not units:
        raise InvalidArgument("payload", 'is empty; expected one {"messages": [...]} object per line')
    check_records(len(units), limits)  # each unit is at least one trace
    reader = TraceReader(limits)
    for where, value in units:
        for at, trace in _read_unit(value, where, limits):
            reader.add(trace, at)
    return reader.traces


def looks_like_openai_chat(value: Any) -> bool:
    """True for `{"messages": [...]}` of chat messages, a message or list of them, or a response with `choices`."""
    if isinstance(value, list):
        return bool(value) and all(_is_chat_message(message) for message in value)
    if not isinstance(value, dict):
        return False
    messages = value.get("messages")
    if isinstance(messages, list):
        return "system" not in value and bool(messages) and all(_is_chat_message(item) for item in messages)
    choices = value.get("choices")
    if isinstance(choices, list):
        return bool(choices) and all(isinstance(choice, dict) and "message" in choice for choice in choices)
    return _is_chat_message(value)


def _is_chat_message(value: Any) -> bool:
    if not isinstance(value, dict) or "type" in value or _reader(value.get("role")) is None:
        return False
    if not any(key in value for key in ("content", "tool_calls", "function_call")):
        return False
    content = value.get("content")
    parts = content if isinstance(content, list) else []
    return not any(isinstance(part, dict) and _text(part.get("type")) in ANTHROPIC_BLOCK_TYPES for part in parts)


def _units(raw: bytes, limits: TraceLimits) -> Records | list[Record]:
    records = read_records(raw, COUNTED, limits)
    # A JSON array of bare messages is one conversation, not one trace per message.
    if records.values and records.values[0][0].startswith("item "):
        if all(_is_bare_message(value) for _, value in records.values):
            return [("document", [value for _, value in records.values])]
    return records


def _is_bare_message(value: Any) -> bool:
    return isinstance(value, dict) and "role" in value and "messages" not in value


def _read_unit(value: Any, where: str, limits: TraceLimits) -> list[tuple[str, Trace]]:
    if isinstance(value, list):
        return [(where, Trace(steps=_conversation(value, f"{where}: ", where, limits)))]
    if isinstance(value, dict) and "messages" in value:
        return [(where, _request_trace(value, where, limits))]
    if isinstance(value, dict) and "choices" in value:
        return _response_traces(value, where)
    raise InvalidArgument(
        where,
        "expected an object with `messages` (a fine-tuning line or chat-completions request), "
        "a JSON array of messages, or a chat-completions response with `choices`",
    )


def _request_trace(document: dict[str, Any], where: str, limits: TraceLimits) -> Trace:
    messages = document["messages"]
    if not isinstance(messages, list):
        raise InvalidArgument(f"{where}: messages", f"must be an array of messages, not {json_type(messages)}")
    metadata: dict[str, Any] = {}
    if isinstance(document.get("model"), str):
        metadata["model"] = document["model"]
    tools = _tool_names(document.get("tools")) or _tool_names(document.get("functions"))
    if tools:
        metadata["tools"] = tools
    if isinstance(document.get("parallel_tool_calls"), bool):
        metadata["parallel_tool_calls"] = document["parallel_tool_calls"]
    steps = _conversation(messages, f"{where}: messages", where, limits)
    return Trace(steps=steps, external_id=text_or_none(document.get("id")), metadata=metadata)


def _tool_names(tools: Any) -> list[str]:
    names = []
    for tool in tools if isinstance(tools, list) else []:
        body = tool.get(_text(tool.get("type")) or "function", tool) if isinstance(tool, dict) else None
        if isinstance(body, dict) and isinstance(body.get("name"), str):
            names.append(body["name"])
    return names


def _response_traces(document: dict[str, Any], where: str) -> list[tuple[str, Trace]]:
    choices = document["choices"]
    if not isinstance(choices, list) or not choices:
        raise InvalidArgument(f"{where}: choices", "must be a non-empty array of choices with `message`")
    response_id = text_or_none(document.get("id"))
    stamp = timestamp_metadata(document.get("created"))
    traces = []
    for index, choice in enumerate(choices):
        at = f"{where}: choices[{index}]"
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict):
            raise InvalidArgument(f"{at}.message", "must be a message object (streamed chunks are not supported)")
        steps = tuple(with_metadata(step, stamp) for step in _message_steps(message, f"{at}.message", {}))
        external_id = response_id if response_id is None or len(choices) == 1 else f"{response_id}#{index}"
        metadata = _response_metadata(document, choice)
        traces.append((at if len(choices) > 1 else where, Trace(steps, external_id, metadata=metadata)))
    return traces


def _response_metadata(document: dict[str, Any], choice: dict[str, Any]) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    if isinstance(document.get("model"), str):
        metadata["model"] = document["model"]
    if isinstance(choice.get("finish_reason"), str):
        metadata["finish_reason"] = choice["finish_reason"]
    usage = document.get("usage")
    if isinstance(usage, dict):
        counts = {key: value for key, value in usage.items() if isinstance(value, int) and not isinstance(value, bool)}
        if counts:
            metadata["usage"] = counts
    return metadata


def _conversation(messages: list[Any], prefix: str, where: str, limits: TraceLimits) -> tuple[Step, ...]:
    check_steps_read(len(messages), where, limits)  # every message is at least one step
    names: ToolNames = {}
    steps: list[Step] = []
    for index, message in enumerate(messages):
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        check_steps_read(len(steps) + (len(calls) if isinstance(calls, list) else 0), where, limits)
        steps.extend(_message_steps(message, f"{prefix}[{index}]", names))
    check_steps_read(len(steps), where, limits)
    return tuple(steps)


def _message_steps(message: Any, at: str, names: ToolNames) -> list[Step]:
    if not isinstance(message, dict):
        raise InvalidArgument(at, f"must be a message object with `role`, not {json_type(message)}")
    reader = _reader(message.get("role"))
    if reader is None:
        roles = ", ".join(_MESSAGE_READERS)
        raise InvalidArgument(f"{at}.role", f"must be one of {roles}, not {message.get('role')!r}")
    return [with_metadata(step, _message_metadata(message)) for step in reader(message, at, names)]


def _message_metadata(message: dict[str, Any]) -> dict[str, Any]:
    metadata = timestamp_metadata(message.get("timestamp", message.get("created_at")))
    if isinstance(message.get("weight"), int | float) and not isinstance(message.get("weight"), bool):
        metadata["weight"] = message["weight"]  # fine-tuning: 0 means "do not train on this message"
    if isinstance(message.get("name"), str) and message.get("role") in ("system", "developer", "user"):
        metadata["name"] = message["name"]
    return metadata


def _system_steps(message: dict[str, Any], at: str, names: ToolNames) -> list[Step]:
    return [Step("system", _content_text(message.get("content"), f"{at}.content"))]


def _user_steps(message: dict[str, Any], at: str, names: ToolNames) -> list[Step]:
    return [Step("user", _content_text(message.get("content"), f"{at}.content"))]


def _assistant_steps(message: dict[str, Any], at: str, names: ToolNames) -> list[Step]:
    text = _content_text(message.get("content"), f"{at}.content")
    if not text and isinstance(message.get("refusal"), str):
        text = message["refusal"]
    calls = _tool_call_steps(message, at, names)
    steps = ([Step("assistant", text)] if text or not calls else []) + calls
    reasoning = message.get("reasoning_content", message.get("reasoning"))
    if isinstance(reasoning, str) and reasoning:
        steps[0] = with_metadata(steps[0], {"reasoning": reasoning})
    return steps


def _tool_call_steps(message: dict[str, Any], at: str, names: ToolNames) -> list[Step]:
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        raise InvalidArgument(f"{at}.tool_calls", f"must be an array of tool calls, not {json_type(calls)}")
    steps = [_tool_call_step(call, f"{at}.tool_calls[{index}]", names) for index, call in enumerate(calls)]
    if message.get("function_call") is not None:
        legacy = {"type": "function", "function": message["function_call"]}
        steps.append(_tool_call_step(legacy, f"{at}.function_call", names))
    return steps


def _tool_call_step(call: Any, at: str, names: ToolNames) -> Step:
    if not isinstance(call, dict):
        raise InvalidArgument(at, f"must be a tool call object, not {json_type(call)}")
    kind = _text(call.get("type")) or "function"
    body = call.get(kind)
    if not isinstance(body, dict) or not isinstance(body.get("name"), str):
        raise InvalidArgument(f"{at}.{kind}.name", f"must be a string; a tool call needs `{kind}: {{name, arguments}}`")
    call_id = text_or_none(call.get("id"))
    if call_id is not None:
        names[call_id] = body["name"]
    arguments = body.get("arguments", body.get("input"))  # custom tools send free text as `input`
    return Step("assistant", "", tool_name=body["name"], tool_input=as_object(arguments), tool_call_id=call_id)


def _tool_steps(message: dict[str, Any], at: str, names: ToolNames) -> list[Step]:
    call_id = message.get("tool_call_id")
    if call_id is not None and not isinstance(call_id, str):
        raise InvalidArgument(f"{at}.tool_call_id", f"must be a string, not {json_type(call_id)}")
    name = names.get(call_id) if call_id is not None else None
    if name is None and isinstance(message.get("name"), str):
        name = message["name"]
    return [Step("tool", _result_text(message.get("content"), f"{at}.content"), name, None, call_id)]


def _function_steps(message: dict[str, Any], at: str, names: ToolNames) -> list[Step]:
    name = text_or_none(message.get("name"))
    return [Step("tool", _result_text(message.get("content"), f"{at}.content"), tool_name=name)]


def _result_text(content: Any, at: str) -> str:
    if isinstance(content, dict):
        return to_json_text(content)
    return _content_text(content, at)


def _content_text(content: Any, at: str) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise InvalidArgument(at, f"must be a string, null or an array of content parts, not {json_type(content)}")
    texts = [_part_text(part, f"{at}[{index}]") for index, part in enumerate(content)]
    return "\n".join(text for text in texts if text)


def _part_text(part: Any, at: str) -> str:
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        raise InvalidArgument(at, f"must be a content part object with `type`, not {json_type(part)}")
    kind = part.get("type")
    if kind in ("text", "refusal"):
        text = part.get(kind)
        if not isinstance(text, str):
            raise InvalidArgument(f"{at}.{kind}", f"must be a string, not {json_type(text)}")
        return text
    if kind == "image_url":
        image = part.get("image_url")
        return media_text(image.get("url") if isinstance(image, dict) else image)
    if kind == "file" and isinstance(part.get("file"), dict) and isinstance(part["file"].get("filename"), str):
        return f"[file: {part['file']['filename']}]"
    return f"[{kind}]" if isinstance(kind, str) else ""


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _reader(role: Any) -> MessageReader | None:
    return _MESSAGE_READERS.get(role) if isinstance(role, str) else None


MessageReader = Callable[[dict[str, Any], str, ToolNames], list[Step]]

_MESSAGE_READERS: dict[str, MessageReader] = {
    "system": _system_steps,
    "developer": _system_steps,
    "user": _user_steps,
    "assistant": _assistant_steps,
    "tool": _tool_steps,
    "function": _function_steps,
}
