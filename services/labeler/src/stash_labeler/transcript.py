"""Chunks as transcript text: what a labeling or grading model reads about a conversation.

Both the LLM labeler and the grader show chunks the same way — id, actor and kind, the steps, then
the label when one is known — so a model sees one format whichever question it is asked. Text beyond
a caller's limit becomes a marked excerpt of its head and tail, never a silent cut.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import orjson

from stash_common.steps import TraceStep
from stash_labeler.chunks import Chunk
from stash_labeler.label_schema import StepLabel


def opening_request(chunks: Sequence[Chunk], position: int, labels: Mapping[str, StepLabel]) -> int | None:
    """The nearest user chunk before `position` labeled a request, else the nearest user chunk at all."""
    users = [earlier for earlier in range(position - 1, -1, -1) if chunks[earlier].kind == "user"]
    requests = (earlier for earlier in users if _intent(labels.get(chunks[earlier].chunk_id)) == "request")
    return next(requests, users[0] if users else None)


def _intent(label: StepLabel | None) -> str | None:
    return label.intent if label is not None else None


def render_chunk(chunk: Chunk, label: StepLabel | None, limit: int) -> str:
    """A chunk as transcript text: id, actor and kind, its steps (an excerpt beyond `limit`), then its label."""
    kind = {"user": "user message", "agent_message": "agent message", "tool_call": "agent tool call"}[chunk.kind]
    body = excerpt("\n".join(_render_step(step) for step in chunk.steps), limit)
    known = f"\nlabel: {compact_label(label)}" if label is not None else ""
    return f"[{chunk.chunk_id}] {kind}\n{body}{known}"


def _render_step(step: TraceStep) -> str:
    if step.is_tool_call:
        call = f"calls tool {step.tool_name} with input {orjson.dumps(step.tool_input or {}).decode()}"
        return f"{call}\n{step.content}" if step.content else call
    if step.role == "tool":
        return f"tool result{_flags(step)} from {step.tool_name or 'a tool'}:\n{step.content}"
    return step.content


def _flags(step: TraceStep) -> str:
    flags = [f"{key}={json.dumps(step.metadata[key])}" for key in ("is_error", "exit_code") if key in step.metadata]
    return f" ({', '.join(flags)})" if flags else ""


def excerpt(text: str, limit: int) -> str:
    """`text` itself when it fits in `limit` characters, else its head and tail around a marker of what was cut."""
    if len(text) <= limit:
        return text
    room = limit - len(_omitted(len(text)))
    head, tail = text[: room - room // 2], text[len(text) - room // 2 :]
    return head + _omitted(len(text) - len(head) - len(tail)) + tail


def _omitted(count: int) -> str:
    return f"\n[… {count:,} characters omitted …]\n"


def compact_label(label: StepLabel) -> str:
    """A label as one line of JSON, without evidence and note."""
    return orjson.dumps(label.model_dump(exclude_none=True, exclude={"evidence", "note"})).decode()
