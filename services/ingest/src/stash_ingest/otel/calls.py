"""LLM calls: which spans are read for messages, and which convention's messages win.

Only LLM-call spans are read: not a span that a convention types as something else (OpenInference
kinds other than LLM, a `gen_ai.operation.name` of a tool, agent, workflow or embedding operation,
OpenLLMetry workflow/task spans and embedding calls). Tool and agent spans are skipped because every
tool call and result they record reappears in the next LLM call's input.

A span instrumented twice (a framework and its client library) records the same messages in several
conventions, so per side only the first source present is read, newest convention first:
`gen_ai.input.messages` (attribute, else the inference-details event), OpenInference
`llm.input_messages.*`, OpenLLMetry `gen_ai.prompt.*`, then the deprecated GenAI message events;
outputs likewise. `gen_ai.system_instructions` is prepended to the input as a system message.
Output steps carry `metadata["timestamp"]` = the span's end time; input steps stay untimed, since
they were written earlier, at a time the span does not record.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stash_ingest.adapters.messages import with_metadata
from stash_ingest.adapters.reading import timestamp_from_ns
from stash_ingest.limits import TraceLimits, check_steps_read
from stash_ingest.otel.conventions import genai, openinference, openllmetry
from stash_ingest.otel.messages import Located, steps_of
from stash_ingest.otel.spans import SpanView
from stash_ingest.traces import Step

Source = Callable[[SpanView, str], list[Located] | None]  # one way a span records messages; None: absent

INPUT_SOURCES: tuple[Source, ...] = (
    genai.input_messages,
    openinference.input_messages,
    openllmetry.prompt_messages,
    genai.event_inputs,
)
OUTPUT_SOURCES: tuple[Source, ...] = (
    genai.output_messages,
    openinference.output_messages,
    openllmetry.completion_messages,
    genai.event_outputs,
)
NOT_LLM_TESTS: tuple[Callable[[Mapping[str, Any]], bool], ...] = (
    openinference.is_not_llm_call,
    genai.is_not_llm_call,
    openllmetry.is_not_llm_call,
)


@dataclass(frozen=True)
class Call:
    """One LLM call: its span, the steps it was sent and the steps it returned."""

    span: SpanView
    inputs: list[Step]
    outputs: list[Step]


def call_of(view: SpanView, where: str, trace_where: str, limits: TraceLimits) -> Call | None:
    """The LLM call a span records; None for other spans and for calls that recorded no messages.

    Every message is at least one step and every message of a call ends up in its trace (read at
    `trace_where`), so a call with more messages than a trace may hold steps is refused before they become steps,
    and one whose message text is large before that text is decoded."""
    if any(marks_other(view.attributes) for marks_other in NOT_LLM_TESTS):
        return None
    check_steps_read(genai.streamed_message_count(view, limits.steps_per_trace), trace_where, limits)
    inputs = [*genai.system_instructions(view, where), *_first_source(INPUT_SOURCES, view, where)]
    outputs = _first_source(OUTPUT_SOURCES, view, where)
    if not inputs and not outputs:
        return None
    check_steps_read(len(inputs) + len(outputs), trace_where, limits)
    moment = timestamp_from_ns(view.end_ns) if view.end_ns else None
    stamp = {"timestamp": moment} if moment else {}
    output_steps = [with_metadata(step, stamp) for step in steps_of(outputs)]
    return Call(view, _dedupe_system(steps_of(inputs)), output_steps)


def _first_source(sources: Sequence[Source], view: SpanView, where: str) -> list[Located]:
    for source in sources:
        messages = source(view, where)
        if messages is not None:
            return messages
    return []


def _dedupe_system(steps: list[Step]) -> list[Step]:
    # Some instrumentations record the system prompt both as instructions and as the first input message.
    if len(steps) > 1 and steps[0].role == steps[1].role == "system" and steps[0].content == steps[1].content:
        return steps[1:]
    return steps
