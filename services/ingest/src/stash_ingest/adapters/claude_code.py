"""Claude Code session transcripts (`~/.claude/projects/**/*.jsonl`): one trace per file.

A transcript logs events, not messages. How they become steps:

- One API response is written as several `assistant` lines (one content block each) sharing
  `message.id`, with tool results and hook lines possibly between them. Steps stand in the order
  their lines were written: a response's lines group together only while nothing else came in
  between, so a result written between two parallel calls stays between them. Any earlier
  snapshot of a growing file (cut at any line) therefore gives a prefix of the later one's
  steps. Blank text blocks (Claude Code writes "\\n\\n") are dropped.
- Thinking is no step: its text goes to `metadata["reasoning"]` of the next step of the same
  response, never to a step read earlier, so a longer snapshot of a growing file only appends steps
  (a thinking block with no text or tool call after it is dropped).
- `user` lines: each `tool_result` block is a `tool` step (`metadata["is_error"]` from the block,
  or when the line's `toolUseResult` is a plain string, Claude Code's form for errors and
  rejections); the other blocks form one step. What the human did not type is context, so a
  `system` step: `isMeta` hook and skill injections (`metadata["is_meta"]`), local command and
  shell output (`metadata["command_output"]`) and the compaction summary
  (`metadata["compact_summary"]`; the `compact_boundary` marker itself is skipped).
- `system` lines with text (`local_command`, …) are system steps with `metadata["subtype"]`;
  `turn_duration` and `stop_hook_summary` are bookkeeping. `progress` lines (hook runs and copies of
  subagent messages), `file-history-snapshot`, `queue-operation` and unknown line types are skipped.
- Title: the last `custom-title` (/rename), else `ai-title`, else `summary` line.
- A subagent's own file (`isSidechain`, `agentId`) is its own trace: external_id
  `"<sessionId>:agent-<agentId>"` and `metadata["agent_id"]`. A main file's external_id is the
  sessionId; sidechain lines that old versions wrote into it inline are skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from stash_common.errors import InvalidArgument
from stash_ingest.adapters.messages import media_text, with_metadata
from stash_ingest.adapters.reading import (
    as_object,
    object_or_empty,
    split_growing_jsonl,
    text_or_none,
    timestamp_metadata,
    to_json_text,
)
from stash_ingest.limits import DEFAULT_LIMITS, TraceLimits, TraceReader, check_steps_read
from stash_ingest.traces import Step, Trace

LINE_TYPES = frozenset(
    {
        "user",
        "assistant",
        "system",
        "summary",
        "progress",
        "file-history-snapshot",
        "queue-operation",
        "custom-title",
        "ai-title",
        "agent-name",
    }
)
_BOOKKEEPING_SUBTYPES = frozenset({"compact_boundary", "turn_duration", "stop_hook_summary"})
_COMMAND_OUTPUT_TAGS = ("<local-command-stdout>", "<local-command-stderr>", "<bash-stdout>", "<bash-stderr>")
_FACT_KEYS = {"sessionId": "session_id", "cwd": "cwd", "version": "version", "gitBranch": "git_branch", "slug": "slug"}
_TITLE_KEYS = {"custom-title": "customTitle", "ai-title": "aiTitle", "summary": "summary"}
_USAGE_KEYS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")

Line = dict[str, Any]


@dataclass
class _Response:
    """The steps of one API response (one `message.id`), filled as its lines arrive."""

    steps: list[Step] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)


@dataclass
class _Transcript:
    """What has been read so far: steps in recorded order, and the facts for the trace."""

    slots: list[list[Step] | _Response] = field(default_factory=list)
    responses: dict[str, _Response] = field(default_factory=dict)
    tool_names: dict[str, str] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
    titles: dict[str, str] = field(default_factory=dict)
    usage: dict[str, dict[str, Any]] = field(default_factory=dict)
    sidechain: bool | None = None  # decided by the first line that says
    step_count: int = 0  # steps in the slots so far, counted as they are added


def parse_claude_code(raw: bytes, limits: TraceLimits = DEFAULT_LIMITS) -> list[Trace]:
    """One trace from one Claude Code transcript file; InvalidArgument names the line at fault."""
    transcript = _Transcript()
    for where, value in split_growing_jsonl(raw):
        _read_line(transcript, where, _as_line(value, where))
        check_steps_read(transcript.step_count, "transcript", limits)
    reader = TraceReader(limits)
    reader.add(_build_trace(transcript), "transcript")
    return reader.traces


def looks_like_claude_code(value: Any) -> bool:
    """True for a transcript line: a known line `type` with `sessionId`, or a title/snapshot line."""
    if not isinstance(value, dict) or not isinstance(value.get("type"), str) or value["type"] not in LINE_TYPES:
        return False
    return any(key in value for key in ("sessionId", "leafUuid", "snapshot", "customTitle", "aiTitle"))


def _as_line(value: Any, where: str) -> Line:
    if not isinstance(value, dict):
        raise InvalidArgument(where, "expected a JSON object: one Claude Code transcript event per line")
    if not isinstance(value.get("type"), str):
        raise InvalidArgument(f"{where}: type", "expected a line type such as user, assistant, system or summary")
    return value


def _read_line(transcript: _Transcript, where: str, line: Line) -> None:
    if transcript.sidechain is None and isinstance(line.get("isSidechain"), bool):
        transcript.sidechain = line["isSidechain"]
    if transcript.sidechain is False and line.get("isSidechain") is True:
        return  # an old-style inline subagent turn: not this conversation
    _note_facts(transcript, line)
    reader = _LINE_READERS.get(line["type"])
    if reader is not None:
        reader(transcript, where, line)


def _note_facts(transcript: _Transcript, line: Line) -> None:
    """The first recorded value of each session fact wins, so a growing file keeps its identity."""
    found = {name: line.get(key) for key, name in _FACT_KEYS.items()}
    if transcript.sidechain:
        found["agent_id"] = line.get("agentId")
    message = line.get("message")
    if line["type"] == "assistant" and isinstance(message, dict) and message.get("model") != "<synthetic>":
        found["model"] = message.get("model")
    for name, value in found.items():
        if isinstance(value, str) and value and name not in transcript.facts:
            transcript.facts[name] = value


def _read_title(transcript: _Transcript, where: str, line: Line) -> None:
    text = line.get(_TITLE_KEYS[line["type"]])
    if isinstance(text, str) and text.strip():
        transcript.titles[line["type"]] = text.strip()


def _read_system(transcript: _Transcript, where: str, line: Line) -> None:
    subtype, content = line.get("subtype"), line.get("content")
    if subtype in _BOOKKEEPING_SUBTYPES or not isinstance(content, str) or not content.strip():
        return
    metadata = timestamp_metadata(line.get("timestamp"))
    if isinstance(subtype, str):
        metadata["subtype"] = subtype
    transcript.slots.append([Step("system", content, metadata=metadata)])
    transcript.step_count += 1


def _read_assistant(transcript: _Transcript, where: str, line: Line) -> None:
    message = _message(line, where)
    message_id = message.get("id")
    key = message_id if isinstance(message_id, str) else str(line.get("uuid") or where)
    response = transcript.responses.get(key)
    if response is None or transcript.slots[-1] is not response:
        # A continuation after other steps opens a new slot, so earlier steps never move.
        pending = response.reasoning if response is not None else []
        response = transcript.responses[key] = _Response(reasoning=list(pending))
        transcript.slots.append(response)
    if isinstance(message.get("usage"), dict) and message.get("model") != "<synthetic>":
        transcript.usage[key] = message["usage"]
    for block in _blocks(message.get("content")):
        _add_block(transcript, response, block, line)


def _add_block(transcript: _Transcript, response: _Response, block: dict[str, Any], line: Line) -> None:
    if block.get("type") == "thinking":
        if isinstance(block.get("thinking"), str) and block["thinking"].strip():
            response.reasoning.append(block["thinking"])
        return
    metadata = timestamp_metadata(line.get("timestamp"))
    if line.get("isApiErrorMessage") is True:
        metadata["is_error"] = True
    step = _assistant_step(transcript, block, metadata)
    if step is None:
        return
    if response.reasoning:
        step = with_metadata(step, {"reasoning": "\n\n".join(response.reasoning)})
        response.reasoning.clear()
    response.steps.append(step)
    transcript.step_count += 1


def _assistant_step(transcript: _Transcript, block: dict[str, Any], metadata: dict[str, Any]) -> Step | None:
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str) and block["text"].strip():
        return Step("assistant", block["text"], metadata=metadata)
    if kind not in ("tool_use", "server_tool_use"):
        return None  # blank text, redacted thinking, server tool results
    name = text_or_none(block.get("name"))
    call_id = text_or_none(block.get("id"))
    if call_id and name:
        transcript.tool_names[call_id] = name
    return Step("assistant", "", name, as_object(block.get("input")), call_id, metadata)


def _read_user(transcript: _Transcript, where: str, line: Line) -> None:
    content = _message(line, where).get("content")
    if isinstance(content, str):
        steps = [_context_or_user(line, content)] if content.strip() else []
    else:
        steps = list(_user_block_steps(transcript, line, _blocks(content)))
    transcript.slots.append(steps)
    transcript.step_count += len(steps)


def _user_block_steps(transcript: _Transcript, line: Line, blocks: list[dict[str, Any]]) -> Iterator[Step]:
    parts: list[str] = []
    for block in blocks:
        if block.get("type") != "tool_result":
            parts.append(_block_text(block))
            continue
        if "".join(parts).strip():
            yield _context_or_user(line, "\n".join(parts))
        parts = []
        yield _tool_step(transcript, line, block)
    if "".join(parts).strip():
        yield _context_or_user(line, "\n".join(parts))


def _context_or_user(line: Line, text: str) -> Step:
    metadata = timestamp_metadata(line.get("timestamp"))
    if line.get("isCompactSummary") is True:
        metadata["compact_summary"] = True
    elif line.get("isMeta") is True:
        metadata["is_meta"] = True
    elif text.lstrip().startswith(_COMMAND_OUTPUT_TAGS):
        metadata["command_output"] = True
    else:
        return Step("user", text, metadata=metadata)
    return Step("system", text, metadata=metadata)


def _tool_step(transcript: _Transcript, line: Line, block: dict[str, Any]) -> Step:
    call_id = text_or_none(block.get("tool_use_id"))
    metadata = timestamp_metadata(line.get("timestamp"))
    flagged = block.get("is_error")
    if flagged is True or (flagged is None and isinstance(line.get("toolUseResult"), str)):
        metadata["is_error"] = True
    name = transcript.tool_names.get(call_id) if call_id else None
    return Step("tool", _result_text(block.get("content")), name, None, call_id, metadata)


def _result_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_block_text(block) if isinstance(block, dict) else to_json_text(block) for block in content)
    return to_json_text(content)


def _block_text(block: dict[str, Any]) -> str:
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        return block["text"]
    if kind == "image":
        source = object_or_empty(block.get("source"))
        return media_text(source.get("url"))
    return f"[{kind}]" if isinstance(kind, str) else to_json_text(block)


def _message(line: Line, where: str) -> dict[str, Any]:
    message = line.get("message")
    if not isinstance(message, dict):
        raise InvalidArgument(f"{where}: message", f"a {line['type']} line needs a message object with content")
    return message


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [block for block in content if isinstance(block, dict)] if isinstance(content, list) else []


def _build_trace(transcript: _Transcript) -> Trace:
    steps = tuple(step for slot in transcript.slots for step in (slot.steps if isinstance(slot, _Response) else slot))
    if not steps:
        raise InvalidArgument(
            "transcript: steps",
            "no user or assistant message found; expected a Claude Code session transcript "
            "(~/.claude/projects/**/*.jsonl)",
        )
    facts = transcript.facts
    session, agent = facts.get("session_id"), facts.get("agent_id")
    external_id = f"{session}:agent-{agent}" if session and agent else session
    titles = transcript.titles
    title = titles.get("custom-title") or titles.get("ai-title") or titles.get("summary")
    metadata = {"agent": "claude-code", **facts, **_usage_totals(transcript.usage)}
    return Trace(steps=steps, external_id=external_id, title=title, metadata=metadata)


def _usage_totals(usage: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Token totals over responses; each response's lines repeat its usage, so the last one counts."""
    totals = {key: 0 for key in _USAGE_KEYS}
    for counts in usage.values():
        for key in _USAGE_KEYS:
            value = counts.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                totals[key] += value
    return {"usage": totals} if usage else {}


_LINE_READERS: dict[str, Callable[[_Transcript, str, Line], None]] = {
    "user": _read_user,
    "assistant": _read_assistant,
    "system": _read_system,
    "summary": _read_title,
    "custom-title": _read_title,
    "ai-title": _read_title,
}
