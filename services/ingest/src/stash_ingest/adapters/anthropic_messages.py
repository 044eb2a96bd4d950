"""Anthropic Messages API bodies: requests `{"system"?, "messages": [...]}` and responses `{"type": "message"}`.

A request (one per JSONL line, or one JSON document) is one trace: the system prompt, then every
message's blocks in order. `tool_result` blocks arrive inside *user* messages and become `tool`
steps where they sit; the text around them becomes user steps. A response is one trace of its
assistant steps. Thinking text goes to `metadata["reasoning"]` of the message's first step;
redacted thinking carries nothing readable and is dropped. A recorded request may carry a string `id` (not
part of Anthropic's body): like a response's `id`, it becomes the trace's external id, so importing the
same file again updates those traces instead of adding copies.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from stash_common.errors import InvalidArgument
from stash_ingest.adapters.messages import media_text, with_metadata
from stash_ingest.adapters.reading import Counted, as_object, json_type, list_or_empty, read_records, to_json_text
from stash_ingest.limits import DEFAULT_LIMITS, TraceLimits, TraceReader, check_records, check_steps_read
from stash_ingest.traces import Step, Trace

ANTHROPIC_ONLY_BLOCKS = frozenset(
    {"image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking", "server_tool_use"}
)
MESSAGE_ROLES = ("user", "assistant")

ToolNames = dict[str, str]  # tool_use id → tool name, so a result can name the tool it answers


@dataclass(frozen=True)
class _Text:
    """A readable piece of a message; `inline` pieces (cited spans) continue the sentence around them."""

    text: str
    inline: bool = False


@dataclass(frozen=True)
class _Thought:
    text: str


_Piece = _Text | _Thought | Step | None

# A message counts as a step while reading (one whose content is empty makes none, a rare case).
COUNTED: Counted = {"messages.item.role": "steps"}


def parse_anthropic_messages(raw: bytes, limits: TraceLimits = DEFAULT_LIMITS) -> list[Trace]:
    """Parse Messages API requests (JSONL or one document) and responses into traces."""
    records = read_records(raw, COUNTED, limits)
    if not records:
        raise InvalidArgument("payload", 'is empty; expected one {"system"?, "messages": [...]} object per line')
    check_records(len(records), limits)
    reader = TraceReader(limits)
    for where, value in records:
        reader.add(_read_unit(value, where, limits), where)
    return reader.traces


def looks_like_anthropic_messages(value: Any) -> bool:
    """True for a response `{"type": "message"}`, or `messages` with `system` or Anthropic-only content blocks."""
    if not isinstance(value, dict):
        return False
    if value.get("type") == "message":
        return value.get("role") == "assistant" and isinstance(value.get("content"), list)
    messages = value.get("messages")
    if not isinstance(messages, list) or not messages or not all(_is_message(item) for item in messages):
        return False
    return "system" in value or any(_has_anthropic_blocks(item) for item in messages)


def _is_message(value: Any) -> bool:
    if not isinstance(value, dict) or "tool_calls" in value or "function_call" in value:
        return False
    return value.get("role") in MESSAGE_ROLES and isinstance(value.get("content"), str | list)


def _has_anthropic_blocks(message: dict[str, Any]) -> bool:
    blocks = message["content"] if isinstance(message["content"], list) else []
    return any(isinstance(block, dict) and _string(block.get("type")) in ANTHROPIC_ONLY_BLOCKS for block in blocks)


def _read_unit(value: Any, where: str, limits: TraceLimits) -> Trace:
    if isinstance(value, dict) and value.get("type") == "message":
        return _response_trace(value, where)
    if isinstance(value, dict) and "messages" in value:
        return _request_trace(value, where, limits)
    raise InvalidArgument(
        where, 'expected a Messages API request {"system"?, "messages": [...]} or a response {"type": "message", ...}'
    )


def _request_trace(document: dict[str, Any], where: str, limits: TraceLimits) -> Trace:
    messages = document["messages"]
    if not isinstance(messages, list):
        raise InvalidArgument(f"{where}: messages", f"must be an array of messages, not {json_type(messages)}")
    names: ToolNames = {}
    steps = _system_steps(document.get("system"), f"{where}: system")
    for index, message in enumerate(messages):
        steps.extend(_message_steps(message, f"{where}: messages[{index}]", names))
        check_steps_read(len(steps), where, limits)
    return Trace(steps=tuple(steps), external_id=_string(document.get("id")), metadata=_request_metadata(document))


def _request_metadata(document: dict[str, Any]) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    if isinstance(document.get("model"), str):
        metadata["model"] = document["model"]
    tools = list_or_empty(document.get("tools"))
    tool_names = [tool["name"] for tool in tools if isinstance(tool, dict) and isinstance(tool.get("name"), str)]
    if tool_names:
        metadata["tools"] = tool_names
    return metadata


def _response_trace(document: dict[str, Any], where: str) -> Trace:
    if document.get("role") != "assistant":
        raise InvalidArgument(
            f"{where}: role", f"a response message must have role 'assistant', not {document.get('role')!r}"
        )
    steps = _content_steps(document.get("content"), "assistant", f"{where}: content", {})
    metadata: dict[str, Any] = {}
    for key in ("model", "stop_reason"):
        if isinstance(document.get(key), str):
            metadata[key] = document[key]
    usage = document.get("usage")
    if isinstance(usage, dict):
        counts = {key: value for key, value in usage.items() if isinstance(value, int) and not isinstance(value, bool)}
        if counts:
            metadata["usage"] = counts
    external_id = document["id"] if isinstance(document.get("id"), str) else None
    return Trace(steps=tuple(steps), external_id=external_id, metadata=metadata)


def _system_steps(system: Any, at: str) -> list[Step]:
    if system is None:
        return []
    if isinstance(system, list):
        texts = [_system_block_text(block, f"{at}[{index}]") for index, block in enumerate(system)]
        system = "\n".join(texts)
    if not isinstance(system, str):
        raise InvalidArgument(at, f"must be a string or an array of text blocks, not {json_type(system)}")
    return [Step("system", system)] if system else []


def _system_block_text(block: Any, at: str) -> str:
    if not isinstance(block, dict) or block.get("type") != "text" or not isinstance(block.get("text"), str):
        raise InvalidArgument(at, 'must be a text block {"type": "text", "text": "..."}')
    return block["text"]


def _message_steps(message: Any, at: str, names: ToolNames) -> list[Step]:
    if not isinstance(message, dict):
        raise InvalidArgument(at, f"must be a message object with `role` and `content`, not {json_type(message)}")
    role = message.get("role")
    if role not in MESSAGE_ROLES:
        raise InvalidArgument(f"{at}.role", f"must be user or assistant (the system prompt is `system`), not {role!r}")
    return _content_steps(message.get("content"), role, f"{at}.content", names)


def _content_steps(content: Any, role: str, at: str, names: ToolNames) -> list[Step]:
    if isinstance(content, str):
        return [Step(role, content)]
    if not isinstance(content, list):
        raise InvalidArgument(at, f"must be a string or an array of content blocks, not {json_type(content)}")
    pieces = [_read_block(block, f"{at}[{index}]", names) for index, block in enumerate(content)]
    steps = _join_pieces(role, [piece for piece in pieces if isinstance(piece, _Text | Step)])
    reasoning = "\n".join(piece.text for piece in pieces if isinstance(piece, _Thought))
    if not reasoning:
        return steps
    first = steps[0] if steps else Step("assistant", "")
    return [with_metadata(first, {"reasoning": reasoning}), *steps[1:]]


def _join_pieces(role: str, pieces: list[_Text | Step]) -> list[Step]:
    """Runs of readable pieces become one step of `role`; tool steps stay where they occurred."""
    steps: list[Step] = []
    run: list[_Text] = []
    for piece in [*pieces, None]:
        if isinstance(piece, _Text):
            run.append(piece)
            continue
        if run:
            steps.append(Step(role, _joined(run)))
            run = []
        if piece is not None:
            steps.append(piece)
    return steps


def _joined(run: list[_Text]) -> str:
    text = run[0].text
    for previous, piece in zip(run, run[1:], strict=False):
        # Cited spans split one sentence into several blocks; separate blocks otherwise read as paragraphs.
        text += ("" if previous.inline or piece.inline else "\n") + piece.text
    return text


def _read_block(block: Any, at: str, names: ToolNames) -> _Piece:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise InvalidArgument(at, "must be a content block object with a string `type`")
    kind = block["type"]
    if kind.endswith("tool_use"):  # tool_use, and server_tool_use / mcp_tool_use run by the API itself
        return _tool_use_step(block, at, names)
    if kind.endswith("tool_result"):
        return _tool_result_step(block, at, names)
    reader = _BLOCK_READERS.get(kind)
    return reader(block, at) if reader else None


def _text_block(block: dict[str, Any], at: str) -> _Text:
    if not isinstance(block.get("text"), str):
        raise InvalidArgument(f"{at}.text", f"must be a string, not {json_type(block.get('text'))}")
    return _Text(block["text"], inline=bool(block.get("citations")))


def _thinking_block(block: dict[str, Any], at: str) -> _Thought | None:
    thinking = block.get("thinking")
    if thinking is not None and not isinstance(thinking, str):
        raise InvalidArgument(f"{at}.thinking", f"must be a string, not {json_type(thinking)}")
    return _Thought(thinking) if thinking else None


def _image_block(block: dict[str, Any], at: str) -> _Text:
    source = block.get("source")
    return _Text(media_text(source.get("url") if isinstance(source, dict) else None))


def _document_block(block: dict[str, Any], at: str) -> _Text:
    title = block.get("title")
    return _Text(f"[document: {title}]" if isinstance(title, str) and title else "[document]")


def _tool_use_step(block: dict[str, Any], at: str, names: ToolNames) -> Step:
    name, call_id = block.get("name"), block.get("id")
    if not isinstance(name, str):
        raise InvalidArgument(f"{at}.name", f"must be a string, not {json_type(name)}")
    if call_id is not None and not isinstance(call_id, str):
        raise InvalidArgument(f"{at}.id", f"must be a string, not {json_type(call_id)}")
    if call_id is not None:
        names[call_id] = name
    return Step("assistant", "", tool_name=name, tool_input=as_object(block.get("input")), tool_call_id=call_id)


def _tool_result_step(block: dict[str, Any], at: str, names: ToolNames) -> Step:
    call_id = block.get("tool_use_id")
    if not isinstance(call_id, str):
        raise InvalidArgument(f"{at}.tool_use_id", f"must be a string, not {json_type(call_id)}")
    metadata = {"is_error": True} if block.get("is_error") is True else {}
    text = _result_text(block.get("content"), f"{at}.content")
    return Step("tool", text, tool_name=names.get(call_id), tool_call_id=call_id, metadata=metadata)


def _result_text(content: Any, at: str) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, dict):
        return to_json_text(content)
    if not isinstance(content, list):
        raise InvalidArgument(at, f"must be a string or an array of content blocks, not {json_type(content)}")
    return "\n".join(_result_block_text(block, f"{at}[{index}]") for index, block in enumerate(content))


def _result_block_text(block: Any, at: str) -> str:
    kind = block.get("type") if isinstance(block, dict) else None
    reader = _BLOCK_READERS.get(kind) if isinstance(kind, str) else None
    piece = reader(block, at) if reader else None
    return piece.text if isinstance(piece, _Text) else to_json_text(block)


def _string(value: Any) -> str | None:
    return value if isinstance(value, str) else None


BlockReader = Callable[[dict[str, Any], str], _Text | _Thought | None]

# Blocks not listed (redacted_thinking, container_upload, …) carry nothing readable and are skipped.
_BLOCK_READERS: dict[str, BlockReader] = {
    "text": _text_block,
    "thinking": _thinking_block,
    "image": _image_block,
    "document": _document_block,
}
