"""OTLP/JSON traces: a request or TracesData document, or Collector file-exporter JSONL (one per line).

One trace per `traceId` across the whole input: the spans of one trace arrive in several
`resourceSpans` entries and lines, children before parents. Ids may be hex of either case,
base64 (what `MessageToDict` of an opentelemetry-proto message writes) or empty; 64-bit
integers may be strings or JSON numbers; enums may be integers or names (`SPAN_KIND_CLIENT`).

Span dicts. `group_spans` and `build_trace` work on one span representation: the OTLP/JSON span
object as written (camelCase keys, exactly what `MessageToDict` of a proto `Span` gives) plus
`"resource"` (the ResourceSpans' `resource` object, `{"attributes": [...]}`) and `"scope"` (the
ScopeSpans' `scope` object). Log records from `resourceLogs` that carry one of the GenAI events
read below are added to their span's `events` (with their `body`); a log whose span is not in the
input gets a carrier span named "gen_ai events". The live OTLP receiver stores such dicts and
rebuilds a trace from all its stored spans with `build_trace`.

Conversation. Only LLM-call spans are read (not `openinference.span.kind` other than LLM, not a
`gen_ai.operation.name` of a tool/agent/embedding operation, not OpenLLMetry workflow/task spans);
tool spans are skipped because every tool call and result reappears in the next LLM call's input.
Per span, input messages come from the first source present: `gen_ai.input.messages` (JSON text;
attribute, else the `gen_ai.client.inference.operation.details` event), OpenInference
`llm.input_messages.<i>.message.*`, OpenLLMetry `gen_ai.prompt.<i>.*`, or the deprecated events
`gen_ai.{system,user,assistant,tool}.message`; `gen_ai.system_instructions` is prepended as a system
message. Output messages likewise: `gen_ai.output.messages`, `llm.output_messages.*`,
`gen_ai.completion.<i>.*`, `gen_ai.choice` events.

Merge rule. LLM spans are walked in start order. Each call's input steps are matched against the
histories seen so far (every earlier call's input, and its input plus output); the longest history
that is a whole prefix of this input is already in the trace, so only the steps beyond it are
appended, then the call's output steps. A trace whose calls resend the growing history yields every
message once, in order; a retried call adds only its new output; an independent call (a subagent, a
fresh conversation) shares no history and keeps all its messages.

Mapping. `external_id` = the trace id in lower-case hex (None when empty). Output steps get
`metadata["timestamp"]` = their span's end time (ISO-8601 UTC, microseconds); input steps stay
untimed. Reasoning parts go to `metadata["reasoning"]` of the message's first step. Trace metadata:
`service_name`, `provider`, `model` (of the last LLM call recording them), `llm_calls`, and `usage`
totals (`input_tokens`, `output_tokens`, `cache_read_input_tokens`) over the LLM calls.
Every span of the trace becomes a `Span`: lower-case hex ids (an empty span id becomes `unset-<n>`
in start order), `kind` = the instrumentation's own span type when recorded (OpenInference /
OpenLLMetry kind lower-cased, `gen_ai.operation.name` mapped to llm/tool/agent/embedding; "llm" for a
span that yielded messages), else the OTel SpanKind name (`client`, `internal`, …); `input`/`output` =
`input.value`/`output.value`, the gen_ai messages, `traceloop.entity.*` or the tool call's
arguments/result, JSON-decoded, cut to a text prefix above 16 KiB; `step_indices` = the steps the span
contributed. `build_trace` returns None while a trace has no message other than system messages.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from stash_common.errors import InvalidArgument
from stash_ingest.adapters.messages import ROLES, media_text, with_metadata
from stash_ingest.adapters.reading import (
    Record,
    as_object,
    decode_nested,
    load_json,
    read_records,
    timestamp_from_ns,
    to_json_text,
)
from stash_ingest.traces import Span, Step, Trace, validate_trace

SpanDict = dict[str, Any]  # an OTLP/JSON span plus "resource" and "scope" (see the module docstring)
Message = dict[str, Any]  # {"role": ..., "parts": [...]} in the OTel GenAI message shape
Located = tuple[str, Message]  # (where it was read, the message)

NO_MESSAGES = "no LLM messages found in any span (looked for gen_ai.*, llm.*_messages, gen_ai.prompt.*)"
DETAILS_EVENT = "gen_ai.client.inference.operation.details"
CHOICE_EVENT = "gen_ai.choice"
MESSAGE_EVENTS: Mapping[str, str] = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
GENAI_EVENTS = frozenset({DETAILS_EVENT, CHOICE_EVENT, *MESSAGE_EVENTS})
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
SPAN_KINDS = ("unspecified", "internal", "server", "client", "producer", "consumer")
ROLE_ALIASES: Mapping[str, str] = {**ROLES, "model": "assistant", "ipython": "tool"}  # Gemini's and Llama's names
MAX_VALUE_CHARS = 16_384
_HEX = re.compile(r"(?:[0-9a-fA-F]{2})+")


@dataclass(frozen=True)
class _Event:
    name: str
    time_ns: int
    fields: dict[str, Any]  # attributes merged with a log record's body


@dataclass(frozen=True)
class _SpanView:
    id: str
    parent_id: str | None
    name: str
    kind: str | None  # the OTel SpanKind name
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    events: tuple[_Event, ...]
    resource: dict[str, Any]


Source = Callable[[_SpanView, str], list[Located] | None]  # one way a span records messages; None: absent


@dataclass(frozen=True)
class _Call:
    span: _SpanView
    inputs: list[Step]
    outputs: list[Step]


@dataclass
class _Histories:
    """Every earlier call's input (and input plus output) as a trie of step keys; ends are marked."""

    edges: dict[tuple[int, tuple[Any, ...]], int] = field(default_factory=dict)
    ends: set[int] = field(default_factory=lambda: {0})

    def known_prefix(self, keys: Sequence[tuple[Any, ...]]) -> int:
        node, known = 0, 0
        for depth, key in enumerate(keys, start=1):
            next_node = self.edges.get((node, key))
            if next_node is None:
                break
            node = next_node
            known = depth if node in self.ends else known
        return known

    def add(self, keys: Sequence[tuple[Any, ...]]) -> None:
        node = 0
        for key in keys:
            node = self.edges.setdefault((node, key), len(self.edges) + 1)
        self.ends.add(node)


# ---------------------------------------------------------------- public functions


def parse_otel(raw: bytes) -> list[Trace]:
    """Parse OTLP/JSON (one document, an array of them, or file-exporter JSONL) into one trace per traceId."""
    records = read_records(raw)
    if not records:
        raise InvalidArgument("payload", "is empty; expected an OTLP/JSON document with resourceSpans")
    traces: list[Trace] = []
    for trace_id, spans in _group_records(records).items():
        trace = build_trace(trace_id, spans)
        if trace is not None:
            validate_trace(trace, _trace_where(trace_id))
            traces.append(trace)
    if not traces:
        raise InvalidArgument("resourceSpans", NO_MESSAGES)
    return traces


def looks_like_otel(value: Any) -> bool:
    """True for an object with a `resourceSpans` or `resourceLogs` list (an OTLP export request or TracesData)."""
    return isinstance(value, dict) and any(
        isinstance(value.get(key), list) for key in ("resourceSpans", "resourceLogs")
    )


def group_spans(documents: Iterable[Mapping[str, Any]]) -> dict[str, list[SpanDict]]:
    """The span dicts of OTLP/JSON documents by lower-case hex trace id, in input order; GenAI logs attached."""
    return _group_records([(f"document {index}", document) for index, document in enumerate(documents)])


def build_trace(trace_id: str, spans: Sequence[Mapping[str, Any]]) -> Trace | None:
    """The trace made of all these span dicts of one trace; None while they hold no non-system LLM message."""
    trace_id = _hex_id(trace_id, "trace id")
    views = _read_spans(trace_id, spans)
    calls = [call for view in views if (call := _call_of(view, f"{_trace_where(trace_id)}: span {view.id}"))]
    steps, contributed = _merge_calls(calls)
    if all(step.role == "system" for step in steps):
        return None
    return Trace(
        steps=tuple(steps),
        external_id=trace_id or None,
        metadata=_trace_metadata(calls),
        spans=tuple(_canonical_span(view, contributed.get(view.id, ())) for view in views),
    )


# ---------------------------------------------------------------- documents → span dicts


def _group_records(records: Sequence[Record]) -> dict[str, list[SpanDict]]:
    groups: dict[str, list[SpanDict]] = {}
    positions: dict[tuple[str, str], int] = {}
    for where, document in records:
        _check_document(document, where)
        for at, span in spans_of(document, where):
            trace_id, span_id = check_span(span, at)
            spans = groups.setdefault(trace_id, [])
            if span_id:
                positions[trace_id, span_id] = len(spans)
            spans.append(span)
    for where, document in records:
        for at, record, resource in _genai_logs_of(document, where):
            _attach_log(groups, positions, record, resource, at)
    return groups


def check_span(span: Mapping[str, Any], where: str) -> tuple[str, str]:
    """The span's trace and span ids; bad ids or times are reported here, where the line is known."""
    for key in ("startTimeUnixNano", "endTimeUnixNano"):
        _nanos(span.get(key), f"{where}.{key}")
    _hex_id(span.get("parentSpanId"), f"{where}.parentSpanId")
    return _hex_id(span.get("traceId"), f"{where}.traceId"), _hex_id(span.get("spanId"), f"{where}.spanId")


def _check_document(document: Any, where: str) -> None:
    if not looks_like_otel(document):
        raise InvalidArgument(where, "expected an OTLP/JSON object with a resourceSpans or resourceLogs list")


def spans_of(document: Mapping[str, Any], where: str) -> Iterable[tuple[str, SpanDict]]:
    """Each span of a document as a span dict (with its resource and scope), and where it stands."""
    for i, resource_spans in _objects(document, "resourceSpans", where):
        at = f"{where}: resourceSpans[{i}]"
        resource = resource_spans.get("resource") or {}
        for j, scope_spans in _objects(resource_spans, "scopeSpans", at):
            scope = scope_spans.get("scope") or {}
            for k, span in _objects(scope_spans, "spans", f"{at}.scopeSpans[{j}]"):
                yield f"{at}.scopeSpans[{j}].spans[{k}]", {**span, "resource": resource, "scope": scope}


def _genai_logs_of(document: Mapping[str, Any], where: str) -> Iterable[tuple[str, dict[str, Any], Any]]:
    for i, resource_logs in _objects(document, "resourceLogs", where):
        at = f"{where}: resourceLogs[{i}]"
        for j, scope_logs in _objects(resource_logs, "scopeLogs", at):
            for k, record in _objects(scope_logs, "logRecords", f"{at}.scopeLogs[{j}]"):
                if _log_event_name(record) in GENAI_EVENTS:
                    yield f"{at}.scopeLogs[{j}].logRecords[{k}]", record, resource_logs.get("resource") or {}


def _objects(container: Mapping[str, Any], key: str, where: str) -> Iterable[tuple[int, dict[str, Any]]]:
    items = container.get(key)
    if items is None:
        return []
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise InvalidArgument(f"{where}.{key}", "must be a list of objects")
    return enumerate(items)


def _log_event_name(record: Mapping[str, Any]) -> str | None:
    name = record.get("eventName") or _attributes(record.get("attributes")).get("event.name")
    return name if isinstance(name, str) else None


def _attach_log(
    groups: dict[str, list[SpanDict]],
    positions: dict[tuple[str, str], int],
    record: Mapping[str, Any],
    resource: Any,
    where: str,
) -> None:
    trace_id = _hex_id(record.get("traceId"), f"{where}.traceId")
    span_id = _hex_id(record.get("spanId"), f"{where}.spanId")
    time = record.get("timeUnixNano") or record.get("observedTimeUnixNano") or "0"
    _nanos(time, f"{where}.timeUnixNano")
    event = {"name": _log_event_name(record), "timeUnixNano": time, "attributes": record.get("attributes") or []}
    spans = groups.setdefault(trace_id, [])
    if (trace_id, span_id) not in positions:
        positions[trace_id, span_id] = len(spans)
        spans.append(_carrier_span(trace_id, span_id, time, resource))
    position = positions[trace_id, span_id]
    span = spans[position]
    spans[position] = {**span, "events": [*(span.get("events") or []), {**event, "body": record.get("body")}]}


def _carrier_span(trace_id: str, span_id: str, time: Any, resource: Any) -> SpanDict:
    """A span for GenAI log records whose own span is not in the input, timed at the first record."""
    timing = {"startTimeUnixNano": time, "endTimeUnixNano": time}
    return {
        "traceId": trace_id,
        "spanId": span_id,
        "name": "gen_ai events",
        **timing,
        "resource": resource,
        "scope": {},
    }


# ---------------------------------------------------------------- span dicts → views


def _read_spans(trace_id: str, spans: Sequence[Mapping[str, Any]]) -> list[_SpanView]:
    by_id: dict[str, _SpanView] = {}
    unnamed: list[_SpanView] = []
    for index, span in enumerate(spans):
        view = _span_view(span, f"{_trace_where(trace_id)}: spans[{index}]")
        if view.id:
            by_id[view.id] = view  # a span sent twice (a retried export): the later copy wins
        else:
            unnamed.append(view)
    views = sorted([*by_id.values(), *unnamed], key=lambda view: (view.start_ns, view.end_ns, view.id, view.name))
    numbers = iter(range(len(unnamed)))
    return [view if view.id else replace(view, id=f"unset-{next(numbers)}") for view in views]


def _span_view(span: Mapping[str, Any], where: str) -> _SpanView:
    if not isinstance(span, Mapping):
        raise InvalidArgument(where, "must be an OTLP/JSON span object")
    span_id = _hex_id(span.get("spanId"), f"{where}.spanId")
    parent_id = _hex_id(span.get("parentSpanId"), f"{where}.parentSpanId")
    start_ns = _nanos(span.get("startTimeUnixNano"), f"{where}.startTimeUnixNano")
    end_ns = _nanos(span.get("endTimeUnixNano"), f"{where}.endTimeUnixNano")
    resource = span.get("resource") if isinstance(span.get("resource"), Mapping) else {}
    return _SpanView(
        id=span_id,
        parent_id=parent_id if parent_id and parent_id != span_id else None,
        name=span.get("name") if isinstance(span.get("name"), str) else "",
        kind=_span_kind_name(span.get("kind")),
        start_ns=start_ns,
        end_ns=max(end_ns, start_ns),  # an unfinished or clock-skewed span still has to be a valid interval
        attributes=_attributes(span.get("attributes")),
        events=_events(span.get("events"), where),
        resource=_attributes(resource.get("attributes")),
    )


def _events(events: Any, where: str) -> tuple[_Event, ...]:
    read = [_event(event, f"{where}.events[{index}]") for index, event in enumerate(_list(events))]
    return tuple(sorted((event for event in read if event), key=lambda event: event.time_ns))


def _event(event: Any, where: str) -> _Event | None:
    if not isinstance(event, Mapping) or not isinstance(event.get("name"), str):
        return None
    fields = _attributes(event.get("attributes"))
    body = _any_value(event.get("body"))
    if isinstance(body, dict):
        fields = {**body, **fields}
    elif isinstance(body, str):
        fields.setdefault("content", body)
    return _Event(event["name"], _nanos(event.get("timeUnixNano"), f"{where}.timeUnixNano"), fields)


def _span_kind_name(kind: Any) -> str | None:
    if isinstance(kind, int) and not isinstance(kind, bool) and 0 < kind < len(SPAN_KINDS):
        return SPAN_KINDS[kind]
    if isinstance(kind, str) and kind.removeprefix("SPAN_KIND_").lower() in SPAN_KINDS[1:]:
        return kind.removeprefix("SPAN_KIND_").lower()
    return None


# ---------------------------------------------------------------- OTLP values


def _hex_id(value: Any, where: str) -> str:
    """Lower-case hex from hex of either case or base64; empty and all-zero ids (invalid in OTLP) are ""."""
    if value is None or value == "":
        return ""
    if not isinstance(value, str):
        raise InvalidArgument(where, "must be a hex or base64 id string")
    if _HEX.fullmatch(value):
        hex_id = value.lower()
    else:
        try:
            hex_id = base64.b64decode(value.replace("-", "+").replace("_", "/"), validate=True).hex()
        except (binascii.Error, ValueError):
            raise InvalidArgument(where, f"must be a hex or base64 id, not {value!r}") from None
    return hex_id if hex_id.strip("0") else ""


def _nanos(value: Any, where: str) -> int:
    if value is None or value == "":
        return 0
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float):
        return int(value)
    if isinstance(value, str) and value.isdigit():
        return int(value)
    raise InvalidArgument(where, f"must be nanoseconds since the epoch (a decimal string or integer), not {value!r}")


def _attributes(items: Any) -> dict[str, Any]:
    """OTLP key/value attributes as a plain dict of decoded values (later keys win)."""
    if isinstance(items, Mapping):
        return dict(items)
    pairs = (item for item in _list(items) if isinstance(item, Mapping) and isinstance(item.get("key"), str))
    return {item["key"]: _any_value(item.get("value")) for item in pairs}


def _any_value(value: Any) -> Any:
    if not isinstance(value, Mapping):
        return value
    for key, read in _VALUE_READERS.items():
        if key in value:
            return read(value[key])
    return None


def _int_value(value: Any) -> Any:
    return int(value) if isinstance(value, str) and value.lstrip("-").isdigit() else value


def _double_value(value: Any) -> Any:
    return float(value) if isinstance(value, str | int) and not isinstance(value, bool) else value


_VALUE_READERS: Mapping[str, Callable[[Any], Any]] = {
    "stringValue": lambda value: value,
    "boolValue": lambda value: value,
    "intValue": _int_value,
    "doubleValue": _double_value,
    "arrayValue": lambda value: [_any_value(item) for item in _list((value or {}).get("values"))],
    "kvlistValue": lambda value: _attributes((value or {}).get("values")),
    "bytesValue": lambda value: value,  # kept as base64 text
}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


# ---------------------------------------------------------------- LLM calls


def _call_of(view: _SpanView, where: str) -> _Call | None:
    if not _is_llm_candidate(view.attributes):
        return None
    inputs = [*_system_instructions(view, where), *_first_source(_INPUT_SOURCES, view, where)]
    outputs = _first_source(_OUTPUT_SOURCES, view, where)
    if not inputs and not outputs:
        return None
    moment = timestamp_from_ns(view.end_ns) if view.end_ns else None
    stamp = {"timestamp": moment} if moment else {}
    output_steps = [with_metadata(step, stamp) for at, message in outputs for step in _message_steps(message, at)]
    return _Call(view, _dedupe_system(_steps_of(inputs)), output_steps)


def _is_llm_candidate(attributes: Mapping[str, Any]) -> bool:
    span_kind = attributes.get("openinference.span.kind")
    if isinstance(span_kind, str) and span_kind.upper() != "LLM":
        return False
    if attributes.get("gen_ai.operation.name") in NOT_LLM_OPERATIONS:
        return False
    if attributes.get("llm.request.type") in ("embedding", "rerank"):  # OpenLLMetry puts their inputs in gen_ai.prompt
        return False
    return attributes.get("traceloop.span.kind") is None


def _first_source(sources: Sequence[Source], view: _SpanView, where: str) -> list[Located]:
    for source in sources:
        messages = source(view, where)
        if messages is not None:
            return messages
    return []


def _steps_of(messages: list[Located]) -> list[Step]:
    return [step for at, message in messages for step in _message_steps(message, at)]


def _dedupe_system(steps: list[Step]) -> list[Step]:
    # Some instrumentations record the system prompt both as instructions and as the first input message.
    if len(steps) > 1 and steps[0].role == steps[1].role == "system" and steps[0].content == steps[1].content:
        return steps[1:]
    return steps


def _genai_value(view: _SpanView, key: str, where: str) -> tuple[Any, str]:
    """An attribute, else the same key on the inference-details event; with where it was found."""
    if view.attributes.get(key) not in (None, ""):
        return view.attributes[key], f"{where}: {key}"
    for event in reversed(view.events):
        if event.name == DETAILS_EVENT and event.fields.get(key) not in (None, ""):
            return event.fields[key], f"{where}: event {DETAILS_EVENT}: {key}"
    return None, where


def _genai_messages(view: _SpanView, key: str, where: str) -> list[Located] | None:
    value, at = _genai_value(view, key, where)
    if value is None:
        return None
    decoded = load_json(value, at) if isinstance(value, str) else value
    if not isinstance(decoded, list) or not all(isinstance(item, dict) for item in decoded):
        raise InvalidArgument(at, "must be a JSON list of message objects, each with a role and parts")
    return [(f"{at}[{index}]", _genai_message(item, f"{at}[{index}]")) for index, item in enumerate(decoded)]


def _genai_message(message: dict[str, Any], where: str) -> Message:
    if not isinstance(message.get("role"), str):
        raise InvalidArgument(f"{where}.role", "must be a string (system, user, assistant or tool)")
    if "parts" not in message:
        return _chat_message(message, message["role"])  # the chat-completions shape some emitters use
    if not isinstance(message["parts"], list) or not all(isinstance(part, dict) for part in message["parts"]):
        raise InvalidArgument(f"{where}.parts", "must be a list of part objects with a type")
    return message


def _system_instructions(view: _SpanView, where: str) -> list[Located]:
    value, at = _genai_value(view, "gen_ai.system_instructions", where)
    if value is None:
        return []
    decoded = load_json(value, at) if isinstance(value, str) and value.lstrip()[:1] in ("[", "{") else value
    items = decoded if isinstance(decoded, list) else [decoded]
    parts = [{"type": "text", "content": item} if isinstance(item, str) else item for item in items]
    if not all(isinstance(part, dict) for part in parts):
        raise InvalidArgument(at, "must be text or a JSON list of parts")
    return [(at, {"role": "system", "parts": parts})]


def _openinference_messages(view: _SpanView, side: str, where: str) -> list[Located] | None:
    messages = _indexed(view.attributes, f"llm.{side}_messages.", "message.")
    if not messages:
        return None
    default_role = "assistant" if side == "output" else "user"
    return [(f"{where}: llm.{side}_messages.{index}", _flat_message(flat, default_role)) for index, flat in messages]


def _openllmetry_messages(view: _SpanView, prefix: str, where: str) -> list[Located] | None:
    messages = _indexed(view.attributes, f"{prefix}.", "")
    if not messages:
        return None
    default_role = "assistant" if prefix == "gen_ai.completion" else "user"
    return [(f"{where}: {prefix}.{index}", _flat_message(flat, default_role)) for index, flat in messages]


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
        "content": _maybe_parts(flat.get("content")),
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
    return _chat_message(message, message["role"])


def _flat_tool_call(call: Mapping[str, Any]) -> dict[str, Any]:
    name = call.get("tool_call.function.name", call.get("name"))
    arguments = call.get("tool_call.function.arguments", call.get("arguments"))
    return {"id": call.get("tool_call.id", call.get("id")), "function": {"name": name, "arguments": arguments}}


def _flat_content(content: Mapping[str, Any]) -> dict[str, Any]:
    if content.get("type") == "image":
        return {"type": "image_url", "image_url": {"url": content.get("image.image.url")}}
    return {"type": "text", "text": content.get("text")}


def _maybe_parts(content: Any) -> Any:
    """Content that is a JSON list of typed blocks (OpenLLMetry writes list content that way) decoded."""
    if isinstance(content, str) and content.startswith("[{"):
        decoded = decode_nested(content)
        if isinstance(decoded, list) and all(isinstance(block, dict) and "type" in block for block in decoded):
            return decoded
    return content


def _event_inputs(view: _SpanView, where: str) -> list[Located] | None:
    events = [event for event in view.events if event.name in MESSAGE_EVENTS]
    located = [
        (f"{where}: event {event.name}", _event_message(event.fields, MESSAGE_EVENTS[event.name])) for event in events
    ]
    return located or None


def _event_outputs(view: _SpanView, where: str) -> list[Located] | None:
    choices = sorted((event for event in view.events if event.name == CHOICE_EVENT), key=_choice_index)
    located = [(f"{where}: event {CHOICE_EVENT}", _choice_message(event.fields)) for event in choices]
    return located or None


def _choice_index(event: _Event) -> int:
    index = _int_value(event.fields.get("index"))
    return index if isinstance(index, int) else 0


def _event_message(fields: Mapping[str, Any], role: str) -> Message:
    message = {
        **fields,
        "content": _maybe_parts(fields.get("content")),
        "tool_calls": decode_nested(fields.get("tool_calls")),
    }
    if role == "tool":
        message["tool_call_id"] = fields.get("tool_call_id") or fields.get("id")
    return _chat_message(message, fields.get("role") if isinstance(fields.get("role"), str) else role)


def _choice_message(fields: Mapping[str, Any]) -> Message:
    inner = decode_nested(fields.get("message"))
    return _event_message(inner if isinstance(inner, dict) else fields, "assistant")


_INPUT_SOURCES: tuple[Source, ...] = (
    lambda view, where: _genai_messages(view, "gen_ai.input.messages", where),
    lambda view, where: _openinference_messages(view, "input", where),
    lambda view, where: _openllmetry_messages(view, "gen_ai.prompt", where),
    _event_inputs,
)
_OUTPUT_SOURCES: tuple[Source, ...] = (
    lambda view, where: _genai_messages(view, "gen_ai.output.messages", where),
    lambda view, where: _openinference_messages(view, "output", where),
    lambda view, where: _openllmetry_messages(view, "gen_ai.completion", where),
    _event_outputs,
)


# ---------------------------------------------------------------- messages → steps


def _chat_message(message: Mapping[str, Any], role: Any) -> Message:
    """A chat-completions style message (content, tool_calls, tool_call_id) as a GenAI message with parts."""
    if isinstance(role, str) and ROLE_ALIASES.get(role.lower()) == "tool":
        response = {"type": "tool_call_response", "id": message.get("tool_call_id"), "response": message.get("content")}
        return {"role": role, "parts": [{**response, "name": message.get("name")}]}
    parts = _content_parts(message.get("content"))
    for call in _list(message.get("tool_calls")):
        if isinstance(call, dict):
            function = call.get("function") if isinstance(call.get("function"), dict) else call
            parts.append({"type": "tool_call", "id": call.get("id"), **_call_fields(function)})
    if isinstance(message.get("function_call"), dict):
        parts.append({"type": "tool_call", "id": None, **_call_fields(message["function_call"])})
    return {"role": role, "parts": parts}


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


def _message_steps(message: Message, where: str) -> list[Step]:
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
        modality = part.get("modality") if isinstance(part.get("modality"), str) else "image"
        return media_text(part.get("uri"), modality)
    content = part.get("content")
    return content if isinstance(content, str) else None


def _tool_call_step(part: Mapping[str, Any]) -> Step:
    name = part.get("name") if isinstance(part.get("name"), str) else None
    call_id = part.get("id") if isinstance(part.get("id"), str) else None
    return Step("assistant", "", tool_name=name, tool_input=as_object(part.get("arguments")), tool_call_id=call_id)


def _tool_result_step(part: Mapping[str, Any]) -> Step:
    name = part.get("name") if isinstance(part.get("name"), str) else None
    call_id = part.get("id") if isinstance(part.get("id"), str) else None
    return Step("tool", _result_text(part.get("response")), tool_name=name, tool_call_id=call_id)


def _result_text(response: Any) -> str:
    if response is None:
        return ""
    if isinstance(response, list) and all(isinstance(block, dict) and "text" in block for block in response):
        return "\n".join(str(block["text"]) for block in response)
    return to_json_text(response)


# ---------------------------------------------------------------- merging calls into one conversation


def _merge_calls(calls: Sequence[_Call]) -> tuple[list[Step], dict[str, tuple[int, ...]]]:
    steps: list[Step] = []
    contributed: dict[str, tuple[int, ...]] = {}
    histories = _Histories()
    for call in calls:
        input_keys = [_step_key(step) for step in call.inputs]
        known = histories.known_prefix(input_keys)
        start = len(steps)
        steps.extend([*call.inputs[known:], *call.outputs])
        contributed[call.span.id] = tuple(range(start, len(steps)))
        histories.add(input_keys)
        histories.add([*input_keys, *(_step_key(step) for step in call.outputs)])
    return _name_tool_results(steps), contributed


def _step_key(step: Step) -> tuple[Any, ...]:
    """What makes two renderings of a message the same message (metadata such as timestamps aside)."""
    tool_input = to_json_text(step.tool_input) if step.tool_input is not None else None
    tool_name = step.tool_name if step.role == "assistant" else None
    return (step.role, step.content, tool_name, step.tool_call_id, tool_input)


def _name_tool_results(steps: list[Step]) -> list[Step]:
    names: dict[str, str] = {}
    named: list[Step] = []
    for step in steps:
        if step.role == "assistant" and step.tool_call_id and step.tool_name:
            names[step.tool_call_id] = step.tool_name
        if step.role == "tool" and step.tool_name is None and step.tool_call_id in names:
            step = replace(step, tool_name=names[step.tool_call_id])
        named.append(step)
    return named


# ---------------------------------------------------------------- trace metadata and spans


def _trace_metadata(calls: Sequence[_Call]) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    for call in calls:
        attributes = call.span.attributes
        recorded = {
            "service_name": call.span.resource.get("service.name"),
            "provider": _first_text(attributes, "gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system"),
            "model": _first_text(attributes, "gen_ai.response.model", "gen_ai.request.model", "llm.model_name"),
        }
        metadata.update({key: value for key, value in recorded.items() if isinstance(value, str) and value})
    usage = _usage_totals(calls)
    if usage:
        metadata["usage"] = usage
    metadata["llm_calls"] = len(calls)
    return metadata


_USAGE_KEYS: Mapping[str, tuple[str, ...]] = {
    "input_tokens": ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt"),
    "output_tokens": ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.token_count.completion"),
    "cache_read_input_tokens": (
        "gen_ai.usage.cache_read.input_tokens",
        "gen_ai.usage.cache_read_input_tokens",
        "llm.token_count.prompt_details.cache_read",
    ),
}


def _usage_totals(calls: Sequence[_Call]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for call in calls:
        for name, keys in _USAGE_KEYS.items():
            count = _first_count(call.span.attributes, keys)
            if count is not None:
                totals[name] = totals.get(name, 0) + count
    return totals


def _first_count(attributes: Mapping[str, Any], keys: Sequence[str]) -> int | None:
    counts = (_int_value(attributes.get(key)) for key in keys)
    return next((count for count in counts if isinstance(count, int) and not isinstance(count, bool)), None)


def _first_text(attributes: Mapping[str, Any], *keys: str) -> str | None:
    return next((attributes[key] for key in keys if isinstance(attributes.get(key), str) and attributes[key]), None)


def _canonical_span(view: _SpanView, step_indices: tuple[int, ...]) -> Span:
    return Span(
        id=view.id,
        name=view.name,
        start_ns=view.start_ns,
        end_ns=view.end_ns,
        parent_id=view.parent_id,
        kind=_semantic_kind(view, bool(step_indices)),
        input=_span_value(view.attributes, "input.value", "gen_ai.input.messages", "traceloop.entity.input"),
        output=_span_value(view.attributes, "output.value", "gen_ai.output.messages", "traceloop.entity.output"),
        step_indices=step_indices,
    )


def _semantic_kind(view: _SpanView, is_call: bool) -> str | None:
    recorded = _first_text(view.attributes, "openinference.span.kind", "traceloop.span.kind")
    if recorded:
        return recorded.lower()
    operation = view.attributes.get("gen_ai.operation.name")
    if isinstance(operation, str) and operation:
        return OPERATION_KINDS.get(operation, operation)
    return "llm" if is_call else view.kind


def _span_value(attributes: Mapping[str, Any], *keys: str) -> Any:
    tool_key = "gen_ai.tool.call.arguments" if keys[0] == "input.value" else "gen_ai.tool.call.result"
    value = next((attributes[key] for key in (*keys, tool_key) if attributes.get(key) not in (None, "")), None)
    if value is None:
        return None
    decoded = decode_nested(value)
    text = to_json_text(decoded)
    if len(text) > MAX_VALUE_CHARS:  # spans are for the timeline; the full messages are already steps
        return f"{text[:MAX_VALUE_CHARS]}… [truncated, {len(text)} characters]"
    return decoded


def _trace_where(trace_id: str) -> str:
    return f"trace {trace_id or '(empty trace id)'}"
