"""The LLM step labeler: one call per target chunk, with bounded, overlapping context as a cached prompt prefix.

Windows. The targets are labeled in chunk order, grouped into windows of at most `max_chunks` chunks
and `max_chars` rendered characters. A window opens with up to a quarter of both limits of context
just before its first target (the end of the previous window, which is where the overlap comes
from) and keeps a quarter of the characters for the user request that opened the task of its first
target, carried over when it falls before the window. A chunk longer than a quarter of the budget is
shown as a marked excerpt of its head and tail, so every window holds at least one target and no
target is ever dropped.

Prompt. Every call of a window starts with the same two messages: the static instructions with the
label schema, then the window's transcript with the labels known when the window starts. Each call
then appends one short message naming its target, after the window's earlier targets and the labels
given for them. A call's messages are thus the previous call's messages plus its answer, which keeps
the whole conversation a cached prefix (`prompt_cache_key` names the trace and window).

Answers. A label must be a valid StepLabel for the named chunk and actor whose `verdict_target` and
`duplicate_of` name earlier chunks. A violation is sent back once with the reason; a second one, or
a provider error after the client's own retries, raises LabelingError naming the chunk.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import openai
from openai.types.chat import ChatCompletionMessageParam
from openai.types.shared_params import ResponseFormatJSONSchema
from pydantic import ValidationError

from stash_labeler.chunks import Chunk
from stash_labeler.label_schema import LabelSource, StepLabel
from stash_labeler.labeling.protocol import LabelingError
from stash_labeler.traces import LabelerTrace
from stash_labeler.transcript import compact_label, opening_request, render_chunk

ATTEMPTS = 2
# Room counted for each chunk's header and label, whether the label sits in the transcript (known) or
# in an answered turn (a target): compact labels without evidence and note stay well below it.
LABEL_ROOM = 400
MIN_EXCERPT_CHARS = 1_000
LABEL_SCHEMA = StepLabel.model_json_schema()
RESPONSE_FORMAT: ResponseFormatJSONSchema = {
    "type": "json_schema",
    "json_schema": {"name": "step_label", "schema": LABEL_SCHEMA, "strict": False},
}
INSTRUCTIONS = f"""\
You label the steps of a recorded conversation between a user and an AI agent. A label says what a step \
is, without judging it.

The conversation is cut into chunks with ids c0, c1, ...: a user message, an agent message, or a tool \
call together with its result. You are asked to label one chunk at a time. Answer with one JSON object \
in the step_label schema below and nothing else.

Every label has:
- chunk_id: the id of the chunk you are asked to label.
- task_id: the task the chunk belongs to. The first task is "t0"; each later user request starts the \
next one (t1, t2, ...); everything else continues the current task. Agent work before the first request \
belongs to t0. Keep the task ids of the labels already given.
- actor: "user" for a user chunk, "agent" for an agent message or a tool call.
- evidence (optional): a short quote from the chunk that supports the label, at most 500 characters.
- note (optional): a short remark, at most 500 characters.

A user label also has these fields, and none of the agent fields:
- intent: request (asks for something new; starts a task), follow_up (asks more within the current \
task), correction (asks to redo or fix the current task), answer (replies to the agent's question), \
feedback (only reacts), other.
- verdict: the user's reaction to an earlier answer of the agent: accepted, partially_accepted, \
rejected, or none when the message does not react to an answer.
- verdict_target: the chunk id of the earlier agent answer the verdict is about; null when verdict is none.
- sentiment: positive, neutral, negative.

An agent label also has these fields, and none of the user fields:
- type: lookup (a tool call that reads), change (a tool call that changes something), question (asks \
the user), answer (hands a result to the user), message (narration between actions).
- effect: read, write, or none for a message.
- result: what the tool call returned: ok, error, not_found, empty; none for a message.
- duplicate_of: the chunk id of an earlier tool call with the same tool and input that this call \
repeats; null otherwise.
- is_output: true when the user is meant to read it (answers and questions), false otherwise.
- outcome: what an answer claims about the task: done, partial, failed; none for anything else.
- stance: how an answer is stated: confident or hedged; none for anything else.
- coverage: how much of the request an answer covers: complete or partial; none for anything else.

verdict_target and duplicate_of always name an earlier chunk. A chunk marked "carried over" comes from \
before the shown part of the conversation. Text marked "[… N characters omitted …]" was cut to fit; \
label from what is shown.

The step_label JSON schema:
{json.dumps(LABEL_SCHEMA, separators=(",", ":"))}
"""


@dataclass(frozen=True)
class Window:
    """Chunks `start..end-1` sent as one transcript; `targets` (positions) are labeled with it."""

    start: int
    end: int
    targets: tuple[int, ...]


class OpenAILabeler:
    """Labels each target chunk with one Chat Completions call to `model`."""

    def __init__(self, client: openai.OpenAI, model: str, max_chunks: int = 80, max_chars: int = 200_000) -> None:
        if max_chunks < 1 or max_chars // 4 - LABEL_ROOM < MIN_EXCERPT_CHARS:
            minimum = 4 * (LABEL_ROOM + MIN_EXCERPT_CHARS)
            raise ValueError(f"the labeler needs max_chunks >= 1 and max_chars >= {minimum:,}; raise the limits")
        self.client = client
        self.model = model
        self.max_chunks = max_chunks
        self.max_chars = max_chars

    @property
    def source(self) -> LabelSource:
        """Labels from a language model."""
        return LabelSource.LLM

    @property
    def excerpt_chars(self) -> int:
        """The longest a chunk's text is shown; longer ones become excerpts."""
        return self.max_chars // 4 - LABEL_ROOM

    def label(
        self,
        trace: LabelerTrace,
        chunks: Sequence[Chunk],
        targets: Sequence[str],
        known: Mapping[str, StepLabel],
    ) -> dict[str, StepLabel]:
        """Label the targets window by window, in chunk order; earlier labels are context for later ones."""
        positions = {chunk.chunk_id: position for position, chunk in enumerate(chunks)}
        missing = [chunk_id for chunk_id in targets if chunk_id not in positions]
        if missing:
            raise LabelingError(f"chunk {missing[0]}: not a chunk of trace {trace.id}")
        wanted = set(targets)
        labels = {chunk_id: label for chunk_id, label in known.items() if chunk_id not in wanted}
        sizes = [len(render_chunk(chunk, None, self.excerpt_chars)) + LABEL_ROOM for chunk in chunks]
        fresh: dict[str, StepLabel] = {}
        for window in plan_windows(sizes, sorted(positions[t] for t in wanted), self.max_chunks, self.max_chars):
            fresh.update(self._label_window(trace, chunks, window, {**labels, **fresh}, positions))
        return fresh

    def _label_window(
        self,
        trace: LabelerTrace,
        chunks: Sequence[Chunk],
        window: Window,
        labels: Mapping[str, StepLabel],
        positions: Mapping[str, int],
    ) -> dict[str, StepLabel]:
        transcript = render_window(trace, chunks, window, labels, self.excerpt_chars)
        messages: list[ChatCompletionMessageParam] = [
            {"role": "system", "content": INSTRUCTIONS},
            {"role": "user", "content": transcript},
        ]
        cache_key = f"{trace.id}:{window.start}"
        fresh: dict[str, StepLabel] = {}
        for position in window.targets:
            chunk = chunks[position]
            messages.append({"role": "user", "content": _target_message(chunk)})
            label = self._label_target(messages, chunk, positions, cache_key)
            messages.append({"role": "assistant", "content": compact_label(label)})
            fresh[chunk.chunk_id] = label
        return fresh

    def _label_target(
        self, messages: list[ChatCompletionMessageParam], chunk: Chunk, positions: Mapping[str, int], cache_key: str
    ) -> StepLabel:
        attempt: list[ChatCompletionMessageParam] = list(messages)
        for _ in range(ATTEMPTS):
            answer = self._ask(attempt, chunk, cache_key)
            try:
                return check_label(answer, chunk, positions)
            except ValueError as error:
                violation = str(error)
            attempt += [
                {"role": "assistant", "content": answer or "(no answer)"},
                {"role": "user", "content": f"That label is invalid: {violation}. Label {chunk.chunk_id} again."},
            ]
        raise LabelingError(f"chunk {chunk.chunk_id}: no valid label after {ATTEMPTS} attempts: {violation}")

    def _ask(self, messages: list[ChatCompletionMessageParam], chunk: Chunk, cache_key: str) -> str | None:
        try:
            completion = self.client.chat.completions.create(
                model=self.model,
                messages=messages,
                response_format=RESPONSE_FORMAT,
                extra_body={"prompt_cache_key": cache_key},
            )
        except openai.OpenAIError as error:
            raise LabelingError(f"chunk {chunk.chunk_id}: the labeling model failed: {error}") from error
        return completion.choices[0].message.content


def plan_windows(sizes: Sequence[int], targets: Sequence[int], max_chunks: int, max_chars: int) -> list[Window]:
    """Windows covering the `targets` (sorted positions) given each chunk's rendered size.

    Each window has up to a quarter of both limits of context before its first target, keeps a
    quarter of the characters free for a carried-over request, and fills the rest with chunks.
    """
    windows: list[Window] = []
    remaining = list(targets)
    while remaining:
        first = remaining[0]
        start = first
        while first - start < max_chunks // 4 and start > 0 and sum(sizes[start - 1 : first]) <= max_chars // 4:
            start -= 1
        end, used = first, sum(sizes[start:first])
        while end < len(sizes) and end - start < max_chunks and used + sizes[end] <= max_chars - max_chars // 4:
            used += sizes[end]
            end += 1
        covered = tuple(position for position in remaining if position < end)
        windows.append(Window(start, end, covered))
        remaining = remaining[len(covered) :]
    return windows


def render_window(
    trace: LabelerTrace, chunks: Sequence[Chunk], window: Window, labels: Mapping[str, StepLabel], limit: int
) -> str:
    """The transcript message of a window: the carried-over request, then its chunks with their known labels."""
    shown = f"chunks {chunks[window.start].chunk_id} to {chunks[window.end - 1].chunk_id} of {len(chunks)}"
    parts = [f"Conversation {trace.id}, {shown}:"]
    opening = opening_request(chunks, window.targets[0], labels)
    if opening is not None and opening < window.start:
        carried = chunks[opening]
        parts.append(
            "Carried over: the user request that opened the task.\n"
            + render_chunk(carried, labels.get(carried.chunk_id), limit)
        )
    parts += [render_chunk(chunk, labels.get(chunk.chunk_id), limit) for chunk in chunks[window.start : window.end]]
    return "\n\n".join(parts)


def _target_message(chunk: Chunk) -> str:
    return f"Label chunk {chunk.chunk_id} (actor {chunk.actor})."


def check_label(answer: str | None, chunk: Chunk, positions: Mapping[str, int]) -> StepLabel:
    """The model's answer as the label of `chunk`; raises ValueError naming the first violation."""
    if not answer:
        raise ValueError("the answer is empty")
    try:
        label = StepLabel.model_validate_json(answer)
    except ValidationError as error:
        raise ValueError(f"not a valid step label ({_errors(error)})") from None
    if label.chunk_id != chunk.chunk_id:
        raise ValueError(f"chunk_id is {label.chunk_id!r}, expected {chunk.chunk_id!r}")
    if label.actor != chunk.actor:
        raise ValueError(f"actor is {label.actor!r}, but {chunk.chunk_id} is a chunk of the {chunk.actor}")
    for name in ("verdict_target", "duplicate_of"):
        reference = getattr(label, name)
        if reference is not None and positions.get(reference, len(positions)) >= positions[chunk.chunk_id]:
            raise ValueError(f"{name} {reference!r} is not an earlier chunk than {chunk.chunk_id}")
    return label


def _errors(error: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, item['loc'])) or 'label'}: {item['msg']}" for item in error.errors())
