"""Codex CLI rollouts (`~/.codex/sessions/**/rollout-*.jsonl`): one trace per file.

Every line is `{timestamp, type, payload}`. How they become steps:

- Steps come from the `response_item` stream only. Codex writes each message, reasoning summary and
  tool run a second time as `event_msg`; those events are read for usage totals and for typed user
  input that has no `response_item` copy (Codex Desktop 0.128 writes it only as
  `event_msg/user_message`). Within one turn a `user_message` event and a typed `response_item`
  user message are the same message, whichever is written first.
- Roles: `developer` → system. User messages that Codex injects (`# AGENTS.md instructions…`,
  `<environment_context>`, `<user_instructions>`, …) are context, not typed: system steps with
  `metadata["is_meta"]`. Assistant `phase` (commentary, final_answer) goes to `metadata["phase"]`.
- `function_call` (arguments: JSON text → object; an MCP `namespace` prefixes the name),
  `custom_tool_call` (raw input → `{"input": text}`), `local_shell_call` and `web_search_call`
  (tool_input = the action; names "local_shell", "web_search") are assistant tool steps. Outputs
  are `tool` steps paired by `call_id`: plain text as is, and the JSON text
  `{"output", "metadata": {"exit_code"}}` as its inner output. `metadata["exit_code"]` comes from
  that or from the exec header ("Process exited with code N"); non-zero sets `metadata["is_error"]`.
- Reasoning summaries go to `metadata["reasoning"]` of the next assistant step, never of an earlier
  one, so a longer snapshot of a growing file only appends steps.
- `session_meta.base_instructions` is Codex's own system prompt, the same for every session of a
  version: not a step.
- Compaction: a `compacted` line's `replacement_history` repeats what the file already recorded
  (the model's new context), so it adds no steps; a readable `message` (the summary of local
  compaction) is a system step with `metadata["compact_summary"]`, as for Claude Code.
- Images become "[image]" ("[image: url]" for http(s) URLs); the "<image>" wrapper texts are dropped.
- A history page (`session_meta.history_base` naming an earlier rollout and the byte and ordinal
  where its part ends) holds only the rest of the conversation: it is refused until the client
  reconstructs it (the CLI does) instead of being stored incomplete.
- Legacy rollouts (≤0.3x) without the envelope are read too: a header line with `id`, items
  written bare, and `record_type` state lines (skipped).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from stash_common.errors import InvalidArgument
from stash_ingest.adapters.messages import media_text, with_metadata
from stash_ingest.adapters.reading import (
    as_object,
    decode_nested,
    object_or_empty,
    split_growing_jsonl,
    text_or_none,
    timestamp_metadata,
    to_json_text,
)
from stash_ingest.limits import DEFAULT_LIMITS, TraceLimits, TraceReader, check_steps_read
from stash_ingest.traces import Step, Trace

LINE_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
_INJECTED_PREFIXES = (
    "# AGENTS.md instructions",
    "<environment_context>",
    "<user_instructions>",
    "<INSTRUCTIONS>",
    "<turn_aborted>",
    "<user_shell_command>",
)
_IMAGE_TAG = re.compile(r"</?image(\s[^>]*)?>")
_EXIT_CODE = re.compile(r"^(?:Process exited with code|Exit code:) (-?\d+)$", re.MULTILINE)
_META_KEYS = {
    "id": "session_id",
    "cwd": "cwd",
    "originator": "originator",
    "cli_version": "cli_version",
    "model_provider": "model_provider",
    "source": "source",
}

Payload = dict[str, Any]


@dataclass
class _Rollout:
    """What has been read so far: the steps, and the facts for the trace."""

    steps: list[Step] = field(default_factory=list)
    tool_names: dict[str, str] = field(default_factory=dict)
    reasoning: list[str] = field(default_factory=list)  # summaries waiting for the next assistant step
    # Typed user messages of this turn seen as response items minus those seen as events.
    typed_balance: int = 0
    facts: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, Any] | None = None


def parse_codex(raw: bytes, limits: TraceLimits = DEFAULT_LIMITS) -> list[Trace]:
    """One trace from one Codex rollout file; InvalidArgument names the line at fault."""
    rollout = _Rollout()
    for index, (where, value) in enumerate(split_growing_jsonl(raw)):
        _read_line(rollout, where, value, first=index == 0)
        check_steps_read(len(rollout.steps), "rollout", limits)
    reader = TraceReader(limits)
    reader.add(_build_trace(rollout), "rollout")
    return reader.traces


def looks_like_codex(value: Any) -> bool:
    """True for a rollout line: `type` session_meta/response_item/event_msg/turn_context/compacted with `payload`."""
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        return False
    return value["type"] in LINE_TYPES and isinstance(value.get("payload"), dict)


def _read_line(rollout: _Rollout, where: str, line: Any, first: bool) -> None:
    if not isinstance(line, dict):
        raise InvalidArgument(where, "expected a JSON object: one Codex rollout record per line")
    kind = text_or_none(line.get("type"))
    if "payload" in line:
        if not isinstance(line["payload"], dict):
            raise InvalidArgument(f"{where}: payload", "expected an object")
        reader = _LINE_READERS.get(kind) if kind else None
        if reader is not None:
            reader(rollout, where, line["payload"], timestamp_metadata(line.get("timestamp")))
    elif kind in _ITEM_READERS:  # a legacy rollout writes items without the envelope
        _read_item(rollout, where, line, timestamp_metadata(line.get("timestamp")))
    elif first and kind is None and isinstance(line.get("id"), str):
        _read_session_meta(rollout, where, line, {})  # the legacy header line
    elif "record_type" not in line:
        raise InvalidArgument(
            f"{where}: type",
            "expected a Codex rollout line: {timestamp, type, payload} with type session_meta, "
            "response_item, event_msg, turn_context or compacted",
        )


def _read_session_meta(rollout: _Rollout, where: str, payload: Payload, stamp: dict[str, Any]) -> None:
    if payload.get("history_base") is not None:
        raise InvalidArgument(
            f"{where}: payload.history_base",
            "an unresolved Codex history page continues an earlier rollout and holds only part of the "
            "conversation; upload it with `stash-rm sessions upload`, which reconstructs the page first",
        )
    git = object_or_empty(payload.get("git"))
    found = {name: payload.get(key) for key, name in _META_KEYS.items()}
    found |= {"git_branch": git.get("branch"), "git_commit": git.get("commit_hash")}
    _note_facts(rollout, found)


def _read_turn_context(rollout: _Rollout, where: str, payload: Payload, stamp: dict[str, Any]) -> None:
    _note_facts(rollout, {"model": payload.get("model")})


def _note_facts(rollout: _Rollout, found: dict[str, Any]) -> None:
    """The first recorded value of each fact wins, so a growing file keeps its identity."""
    for name, value in found.items():
        if isinstance(value, str) and value and name not in rollout.facts:
            rollout.facts[name] = value


def _read_event(rollout: _Rollout, where: str, payload: Payload, stamp: dict[str, Any]) -> None:
    kind = payload.get("type")
    if kind == "token_count":
        info = payload.get("info")
        if isinstance(info, dict) and isinstance(info.get("total_token_usage"), dict):
            rollout.usage = info["total_token_usage"]
    elif kind == "user_message" and isinstance(payload.get("message"), str):
        rollout.typed_balance -= 1
        if rollout.typed_balance < 0:  # no response item carried it
            images = [media_text(image) for image in payload.get("images") or [] if isinstance(image, str)]
            text = "\n".join(part for part in (payload["message"], *images) if part)
            _add(rollout, Step("user", text, metadata=stamp))


def _read_compacted(rollout: _Rollout, where: str, payload: Payload, stamp: dict[str, Any]) -> None:
    summary = payload.get("message")
    if isinstance(summary, str) and summary.strip():
        _add(rollout, Step("system", summary, metadata={**stamp, "compact_summary": True}))


def _read_item(rollout: _Rollout, where: str, payload: Payload, stamp: dict[str, Any]) -> None:
    kind = payload.get("type")
    reader = _ITEM_READERS.get(kind) if isinstance(kind, str) else None
    if reader is not None:
        reader(rollout, where, payload, stamp)


def _read_message(rollout: _Rollout, where: str, payload: Payload, stamp: dict[str, Any]) -> None:
    role, text = payload.get("role"), _content_text(payload.get("content"))
    if role == "assistant":
        phase = {"phase": payload["phase"]} if isinstance(payload.get("phase"), str) else {}
        if text.strip():
            _add_assistant(rollout, Step("assistant", text, metadata={**stamp, **phase}))
    elif role in ("developer", "system"):
        if text.strip():
            _add(rollout, Step("system", text, metadata=stamp))
    elif role == "user":
        _read_user_item(rollout, text, stamp)
    else:
        raise InvalidArgument(f"{where}: payload.role", f"expected user, assistant or developer, not {role!r}")


def _read_user_item(rollout: _Rollout, text: str, stamp: dict[str, Any]) -> None:
    if text.lstrip().startswith(_INJECTED_PREFIXES):
        _add(rollout, Step("system", text, metadata={**stamp, "is_meta": True}))
        return
    rollout.typed_balance += 1
    if rollout.typed_balance > 0 and text.strip():  # not already read from a user_message event
        _add(rollout, Step("user", text, metadata=stamp))


def _read_reasoning(rollout: _Rollout, where: str, payload: Payload, stamp: dict[str, Any]) -> None:
    parts = [*_list(payload.get("summary")), *_list(payload.get("content"))]
    for part in parts:
        if isinstance(part, dict) and isinstance(part.get("text"), str) and part["text"].strip():
            rollout.reasoning.append(part["text"])


def _read_function_call(rollout: _Rollout, where: str, payload: Payload, stamp: dict[str, Any]) -> None:
    name = text_or_none(payload.get("name"))
    if name and isinstance(payload.get("namespace"), str):
        name = payload["namespace"] + name
    _add_call(rollout, payload.get("call_id"), name, as_object(payload.get("arguments")), stamp)


def _read_custom_call(rollout: _Rollout, where: str, payload: Payload, stamp: dict[str, Any]) -> None:
    raw_input = payload.get("input")
    tool_input = {"input": raw_input} if isinstance(raw_input, str) else as_object(raw_input)
    _add_call(rollout, payload.get("call_id"), payload.get("name"), tool_input, stamp)


def _read_shell_call(rollout: _Rollout, where: str, payload: Payload, stamp: dict[str, Any]) -> None:
    call_id = payload.get("call_id") or payload.get("id")
    _add_call(rollout, call_id, "local_shell", as_object(payload.get("action")), stamp)


def _read_web_search(rollout: _Rollout, where: str, payload: Payload, stamp: dict[str, Any]) -> None:
    _add_call(rollout, payload.get("id"), "web_search", as_object(payload.get("action")), stamp)


def _add_call(rollout: _Rollout, call_id: Any, name: Any, tool_input: dict[str, Any], stamp: dict[str, Any]) -> None:
    call_id = call_id if isinstance(call_id, str) and call_id else None
    name = name if isinstance(name, str) and name else None
    if call_id and name:
        rollout.tool_names[call_id] = name
    _add_assistant(rollout, Step("assistant", "", name, tool_input, call_id, stamp))


def _read_output(rollout: _Rollout, where: str, payload: Payload, stamp: dict[str, Any]) -> None:
    call_id = text_or_none(payload.get("call_id"))
    content, exit_code = _output(payload.get("output"))
    metadata = dict(stamp)
    if exit_code is not None:
        metadata["exit_code"] = exit_code
        if exit_code != 0:
            metadata["is_error"] = True
    name = rollout.tool_names.get(call_id) if call_id else None
    _add(rollout, Step("tool", content, name, None, call_id, metadata))


def _output(output: Any) -> tuple[str, int | None]:
    """The output text and exit code of a tool run, unwrapping `{"output", "metadata"}` JSON text."""
    decoded = decode_nested(output) if isinstance(output, str) else output
    if isinstance(decoded, dict) and "output" in decoded and isinstance(decoded.get("metadata"), dict):
        code = decoded["metadata"].get("exit_code")
        return _output_text(decoded["output"]), code if isinstance(code, int) and not isinstance(code, bool) else None
    if isinstance(output, str):
        return output, _header_exit_code(output)
    return _output_text(output), None


def _output_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return _content_text(value)
    return value if isinstance(value, str) else to_json_text(value)


def _header_exit_code(text: str) -> int | None:
    """The exit code from the report header of an exec output ("…Process exited with code 1\\n…Output:")."""
    header, marker, _ = text.partition("\nOutput:")
    match = _EXIT_CODE.search(header) if marker else None
    return int(match.group(1)) if match else None


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = [_part_text(part) for part in _list(content)]
    return "\n".join(part for part in parts if part is not None)


def _part_text(part: Any) -> str | None:
    if not isinstance(part, dict):
        return to_json_text(part)
    kind, text = part.get("type"), part.get("text")
    if isinstance(text, str):
        return None if _IMAGE_TAG.fullmatch(text.strip()) else text
    if kind in ("input_image", "image"):
        return media_text(part.get("image_url"))
    return f"[{kind}]" if isinstance(kind, str) else to_json_text(part)


def _add_assistant(rollout: _Rollout, step: Step) -> None:
    if rollout.reasoning:
        step = with_metadata(step, {"reasoning": "\n\n".join(rollout.reasoning)})
        rollout.reasoning.clear()
    _add(rollout, step)


def _add(rollout: _Rollout, step: Step) -> None:
    if step.role != "assistant":
        rollout.reasoning.clear()  # reasoning that led to no output before the next input
    if step.role in ("assistant", "tool"):
        rollout.typed_balance = 0  # the turn's input has been answered
    rollout.steps.append(step)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _build_trace(rollout: _Rollout) -> Trace:
    if not rollout.steps:
        raise InvalidArgument(
            "rollout: steps",
            "no message or tool call found; expected a Codex rollout (~/.codex/sessions/**/rollout-*.jsonl)",
        )
    metadata: dict[str, Any] = {"agent": "codex", **rollout.facts}
    if rollout.usage:
        metadata["usage"] = rollout.usage
    return Trace(steps=tuple(rollout.steps), external_id=rollout.facts.get("session_id"), metadata=metadata)


LineReader = Callable[[_Rollout, str, Payload, dict[str, Any]], None]

_ITEM_READERS: dict[str, LineReader] = {
    "message": _read_message,
    "reasoning": _read_reasoning,
    "function_call": _read_function_call,
    "custom_tool_call": _read_custom_call,
    "local_shell_call": _read_shell_call,
    "web_search_call": _read_web_search,
    "function_call_output": _read_output,
    "custom_tool_call_output": _read_output,
}

_LINE_READERS: dict[str, LineReader] = {
    "session_meta": _read_session_meta,
    "turn_context": _read_turn_context,
    "event_msg": _read_event,
    "compacted": _read_compacted,
    "response_item": _read_item,
}
