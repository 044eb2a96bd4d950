"""Messages flattened into indexed attributes, as OpenInference and OpenLLMetry both record them.

Span attributes cannot hold a list of objects, so both conventions spell each message field as its
own key: `<name>.<i>.<inner><field>` (`llm.input_messages.0.message.role`,
`gen_ai.prompt.0.content`), with tool calls and content blocks nested the same way. One reader
serves both because the two spellings differ only in prefixes and in a few field names, which it
accepts side by side. Indices are read as integers (10 comes after 9) and gaps are kept as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stash_ingest.otel.messages import Located, Message, chat_message, decoded_parts


def flat_messages(
    attributes: Mapping[str, Any], name: str, inner: str, default_role: str, where: str
) -> list[Located] | None:
    """The messages under `<name>.<i>.<inner>…` in index order; None when there are none."""
    messages = _indexed(attributes, f"{name}.", inner)
    if not messages:
        return None
    return [(f"{where}: {name}.{index}", _flat_message(flat, default_role)) for index, flat in messages]


def _indexed(flat: Mapping[str, Any], prefix: str, inner: str) -> list[tuple[int, dict[str, Any]]]:
    """`<prefix><i>.<inner><rest>` keys as [(i, {rest: value})], indices as integers (10 after 9), gaps kept."""
    items: dict[int, dict[str, Any]] = {}
    for key, value in flat.items():
        if key.startswith(prefix):
            index, _, rest = key[len(prefix) :].partition(".")
            if index.isdigit() and rest.startswith(inner):
                items.setdefault(int(index), {})[rest[len(inner) :]] = value
    return sorted(items.items())


def _flat_message(flat: Mapping[str, Any], default_role: str) -> Message:
    """An OpenInference or OpenLLMetry flattened message as a GenAI message."""
    calls = [call for _, call in _indexed(flat, "tool_calls.", "")]
    message = {
        "role": flat.get("role") or default_role,
        "content": decoded_parts(flat.get("content")),
        "tool_calls": [_flat_tool_call(call) for call in calls],
        "tool_call_id": flat.get("tool_call_id"),
        "name": flat.get("name"),
    }
    contents = [_flat_content(content) for _, content in _indexed(flat, "contents.", "message_content.")]
    if contents:
        text = message["content"]
        message["content"] = [text, *contents] if isinstance(text, str) and text else contents
    if flat.get("function_call.name"):
        message["function_call"] = {
            "name": flat["function_call.name"],
            "arguments": flat.get("function_call.arguments"),
        }
    return chat_message(message, message["role"])


def _flat_tool_call(call: Mapping[str, Any]) -> dict[str, Any]:
    name = call.get("tool_call.function.name", call.get("name"))
    arguments = call.get("tool_call.function.arguments", call.get("arguments"))
    return {"id": call.get("tool_call.id", call.get("id")), "function": {"name": name, "arguments": arguments}}


def _flat_content(content: Mapping[str, Any]) -> dict[str, Any]:
    if content.get("type") == "image":
        return {"type": "image_url", "image_url": {"url": content.get("image.image.url")}}
    return {"type": "text", "text": content.get("text")}
