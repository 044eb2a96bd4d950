"""GenAI messages (role plus typed parts) as steps: the one shape every convention reader returns.

OpenInference and OpenLLMetry flatten chat-completions messages into attributes, and older emitters
put chat-completions messages where the GenAI conventions expect parts. Each reader converts what it
finds into the GenAI semantic conventions' message shape (`{"role", "parts": [...]}`, with `text`,
`tool_call`, `tool_call_response`, `reasoning`, `uri` and `blob` parts), and only this module turns
that shape into steps. So the three conventions cannot disagree on how text is joined, how tool
calls and results become steps, where reasoning goes or how media is replaced by a placeholder.

A message becomes its text, then one step per tool call or tool result, in part order; its
reasoning parts go to `metadata["reasoning"]` of its first step; a message with nothing in it is
still one empty step, so the turn keeps its place in the conversation and its span a step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stash_common.errors import InvalidArgument
from stash_ingest.adapters.messages import ROLES, media_text, with_metadata
from stash_ingest.adapters.reading import as_object, decode_nested, list_or_empty, text_or_none, to_json_text
from stash_ingest.traces import Step

Message = dict[str, Any]  # {"role": ..., "parts": [...]} in the OTel GenAI message shape
Located = tuple[str, Message]  # (where it was read, the message)

ROLE_ALIASES: Mapping[str, str] = {**ROLES, "model": "assistant", "ipython": "tool"}  # Gemini's and Llama's names


def chat_message(message: Mapping[str, Any], role: Any) -> Message:
    """A chat-completions style message (content, tool_calls, tool_call_id) as a GenAI message with parts."""
    if isinstance(role, str) and ROLE_ALIASES.get(role.lower()) == "tool":
        response = {"type": "tool_call_response", "id": message.get("tool_call_id"), "response": message.get("content")}
        return {"role": role, "parts": [{**response, "name": message.get("name")}]}
    parts = _content_parts(message.get("content"))
    for call in list_or_empty(message.get("tool_calls")):
        if isinstance(call, dict):
            function = call.get("function")
            fields = function if isinstance(function, dict) else call  # some emitters flatten the function
            parts.append({"type": "tool_call", "id": call.get("id"), **_call_fields(fields)})
    function_call = message.get("function_call")
    if isinstance(function_call, dict):
        parts.append({"type": "tool_call", "id": None, **_call_fields(function_call)})
    return {"role": role, "parts": parts}


def decoded_parts(content: Any) -> Any:
    """Content that is a JSON list of typed blocks (OpenLLMetry writes list content that way) decoded."""
    if isinstance(content, str) and content.startswith("[{"):
        decoded = decode_nested(content)
        if isinstance(decoded, list) and all(isinstance(block, dict) and "type" in block for block in decoded):
            return decoded
    return content


def steps_of(messages: list[Located]) -> list[Step]:
    """The steps of messages, each read where it was found (for errors)."""
    return [step for at, message in messages for step in message_steps(message, at)]


def message_steps(message: Message, where: str) -> list[Step]:
    """One GenAI message as steps: its text, then one step per tool call or tool result, in part order."""
    role = _role(message.get("role"), where)
    steps: list[Step] = []
    texts: list[str] = []
    reasoning: list[str] = []
    for part in message["parts"]:
        kind = part.get("type")
        if kind == "reasoning" and isinstance(part.get("content"), str):
            reasoning.append(part["content"])
        elif kind in ("tool_call", "tool_call_response"):
            _flush_text(steps, texts, role)
            steps.append(_tool_call_step(part) if kind == "tool_call" else _tool_result_step(part))
        elif (text := _part_text(part)) is not None:
            texts.append(text)
    _flush_text(steps, texts, role)
    if not steps:
        steps.append(Step(role, ""))
    if reasoning:
        steps[0] = with_metadata(steps[0], {"reasoning": "\n".join(reasoning)})
    return steps


def _call_fields(function: Mapping[str, Any]) -> dict[str, Any]:
    return {"name": function.get("name"), "arguments": function.get("arguments")}


def _content_parts(content: Any) -> list[dict[str, Any]]:
    if content is None or content == "":
        return []
    if not isinstance(content, list):
        return [{"type": "text", "content": content if isinstance(content, str) else to_json_text(content)}]
    parts: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, str):
            parts.append({"type": "text", "content": block})
        elif isinstance(block, dict) and block.get("type") == "image_url":
            url = block.get("image_url", {}).get("url") if isinstance(block.get("image_url"), dict) else None
            parts.append({"type": "uri", "modality": "image", "uri": url})
        elif isinstance(block, dict) and isinstance(block.get("text"), str):
            parts.append({"type": "text", "content": block["text"]})
        elif isinstance(block, dict) and block.get("type") == "image":
            parts.append({"type": "blob", "modality": "image"})
    return parts


def _role(role: Any, where: str) -> str:
    if isinstance(role, str) and role.lower() in ROLE_ALIASES:
        return ROLE_ALIASES[role.lower()]
    raise InvalidArgument(f"{where}.role", f"must be system, user, assistant or tool (or an alias), not {role!r}")


def _flush_text(steps: list[Step], texts: list[str], role: str) -> None:
    text = "\n".join(texts)
    if text:
        steps.append(Step(role, text))
    texts.clear()


def _part_text(part: Mapping[str, Any]) -> str | None:
    if part.get("type") in ("uri", "blob", "file", "image"):
        modality = part.get("modality")
        return media_text(part.get("uri"), modality if isinstance(modality, str) else "image")
    content = part.get("content")
    return content if isinstance(content, str) else None


def _tool_call_step(part: Mapping[str, Any]) -> Step:
    name = text_or_none(part.get("name"))
    call_id = text_or_none(part.get("id"))
    return Step("assistant", "", tool_name=name, tool_input=as_object(part.get("arguments")), tool_call_id=call_id)


def _tool_result_step(part: Mapping[str, Any]) -> Step:
    name = text_or_none(part.get("name"))
    call_id = text_or_none(part.get("id"))
    return Step("tool", _result_text(part.get("response")), tool_name=name, tool_call_id=call_id)


def _result_text(response: Any) -> str:
    if response is None:
        return ""
    if isinstance(response, list) and all(isinstance(block, dict) and "text" in block for block in response):
        return "\n".join(str(block["text"]) for block in response)
    return to_json_text(response)
