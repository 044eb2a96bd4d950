"""The OpenTelemetry GenAI semantic conventions: messages as JSON attributes, events, and the operation.

Current conventions put a call's messages in `gen_ai.input.messages` / `gen_ai.output.messages`
(JSON text of `{"role", "parts"}` messages) and its system prompt in `gen_ai.system_instructions`;
an instrumentation that keeps them off the span writes the same keys on a
`gen_ai.client.inference.operation.details` event, so each key is read from the attribute first,
then from that event. Earlier versions wrote one event per message (`gen_ai.{system,user,assistant,
tool}.message`) and one `gen_ai.choice` per output, with chat-completions bodies; they are still
read, as a last resort. Some emitters write chat-completions messages (no `parts`) under the
current keys; those are converted, not rejected. `gen_ai.operation.name` says what a span does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stash_common.errors import InvalidArgument
from stash_ingest.adapters.reading import STREAM_FROM, count_items, decode_nested, load_json
from stash_ingest.otel.messages import Located, Message, chat_message, decoded_parts
from stash_ingest.otel.spans import Event, SpanView
from stash_ingest.otel.values import int_value

DETAILS_EVENT = "gen_ai.client.inference.operation.details"
CHOICE_EVENT = "gen_ai.choice"
MESSAGE_EVENTS: Mapping[str, str] = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
GENAI_EVENTS = frozenset({DETAILS_EVENT, CHOICE_EVENT, *MESSAGE_EVENTS})
MESSAGE_ATTRIBUTES = ("gen_ai.input.messages", "gen_ai.output.messages")
NOT_LLM_OPERATIONS = frozenset({"execute_tool", "invoke_agent", "create_agent", "embeddings", "invoke_workflow"})
OPERATION_KINDS: Mapping[str, str] = {
    "chat": "llm",
    "text_completion": "llm",
    "generate_content": "llm",
    "execute_tool": "tool",
    "invoke_agent": "agent",
    "create_agent": "agent",
    "embeddings": "embedding",
}


def is_not_llm_call(attributes: Mapping[str, Any]) -> bool:
    """True when `gen_ai.operation.name` names a tool, agent, workflow or embedding operation."""
    operation = attributes.get("gen_ai.operation.name")
    # An attribute may hold any OTLP value (a list, say); only a string can name an operation.
    return isinstance(operation, str) and operation in NOT_LLM_OPERATIONS


def span_kind(attributes: Mapping[str, Any]) -> str | None:
    """The span type `gen_ai.operation.name` implies (llm, tool, agent, embedding; others as named)."""
    operation = attributes.get("gen_ai.operation.name")
    if isinstance(operation, str) and operation:
        return OPERATION_KINDS.get(operation, operation)
    return None


def input_messages(view: SpanView, where: str) -> list[Located] | None:
    """`gen_ai.input.messages`; None when the span records none."""
    return _messages(view, "gen_ai.input.messages", where)


def output_messages(view: SpanView, where: str) -> list[Located] | None:
    """`gen_ai.output.messages`; None when the span records none."""
    return _messages(view, "gen_ai.output.messages", where)


def streamed_message_count(view: SpanView, most: int) -> int:
    """How many messages the span's large message texts (`gen_ai.input.messages`, `gen_ai.output.messages`, of
    at least STREAM_FROM characters) hold, each counted up to `most + 1` by streaming, before any is decoded:
    a text of a million messages is refused without building them. Smaller texts count 0 here (they are
    counted once decoded)."""
    count = 0
    for key in MESSAGE_ATTRIBUTES:
        value, _ = _value(view, key, "")
        if isinstance(value, str) and len(value) >= STREAM_FROM:
            count += count_items(value.encode(), "item", most)
    return count


def system_instructions(view: SpanView, where: str) -> list[Located]:
    """`gen_ai.system_instructions` (text, or a JSON list of parts) as one system message, if present."""
    value, at = _value(view, "gen_ai.system_instructions", where)
    if value is None:
        return []
    decoded = load_json(value, at) if isinstance(value, str) and value.lstrip()[:1] in ("[", "{") else value
    items = decoded if isinstance(decoded, list) else [decoded]
    parts = [{"type": "text", "content": item} if isinstance(item, str) else item for item in items]
    if not all(isinstance(part, dict) for part in parts):
        raise InvalidArgument(at, "must be text or a JSON list of parts")
    return [(at, {"role": "system", "parts": parts})]


def event_inputs(view: SpanView, where: str) -> list[Located] | None:
    """The deprecated per-message events, in time order; None when the span has none."""
    events = [event for event in view.events if event.name in MESSAGE_EVENTS]
    located = [
        (f"{where}: event {event.name}", _event_message(event.fields, MESSAGE_EVENTS[event.name])) for event in events
    ]
    return located or None


def event_outputs(view: SpanView, where: str) -> list[Located] | None:
    """The deprecated `gen_ai.choice` events, by choice index; None when the span has none."""
    choices = sorted((event for event in view.events if event.name == CHOICE_EVENT), key=_choice_index)
    located = [(f"{where}: event {CHOICE_EVENT}", _choice_message(event.fields)) for event in choices]
    return located or None


def _value(view: SpanView, key: str, where: str) -> tuple[Any, str]:
    """An attribute, else the same key on the inference-details event; with where it was found."""
    if view.attributes.get(key) not in (None, ""):
        return view.attributes[key], f"{where}: {key}"
    for event in reversed(view.events):
        if event.name == DETAILS_EVENT and event.fields.get(key) not in (None, ""):
            return event.fields[key], f"{where}: event {DETAILS_EVENT}: {key}"
    return None, where


def _messages(view: SpanView, key: str, where: str) -> list[Located] | None:
    value, at = _value(view, key, where)
    if value is None:
        return None
    decoded = load_json(value, at) if isinstance(value, str) else value
    if not isinstance(decoded, list) or not all(isinstance(item, dict) for item in decoded):
        raise InvalidArgument(at, "must be a JSON list of message objects, each with a role and parts")
    return [(f"{at}[{index}]", _message(item, f"{at}[{index}]")) for index, item in enumerate(decoded)]


def _message(message: dict[str, Any], where: str) -> Message:
    if not isinstance(message.get("role"), str):
        raise InvalidArgument(f"{where}.role", "must be a string (system, user, assistant or tool)")
    if "parts" not in message:
        return chat_message(message, message["role"])  # the chat-completions shape some emitters use
    if not isinstance(message["parts"], list) or not all(isinstance(part, dict) for part in message["parts"]):
        raise InvalidArgument(f"{where}.parts", "must be a list of part objects with a type")
    return message


def _choice_index(event: Event) -> int:
    index = int_value(event.fields.get("index"))
    return index if isinstance(index, int) else 0


def _event_message(fields: Mapping[str, Any], role: str) -> Message:
    message = {
        **fields,
        "content": decoded_parts(fields.get("content")),
        "tool_calls": decode_nested(fields.get("tool_calls")),
    }
    if role == "tool":
        message["tool_call_id"] = fields.get("tool_call_id") or fields.get("id")
    return chat_message(message, fields.get("role") if isinstance(fields.get("role"), str) else role)


def _choice_message(fields: Mapping[str, Any]) -> Message:
    inner = decode_nested(fields.get("message"))
    return _event_message(inner if isinstance(inner, dict) else fields, "assistant")
