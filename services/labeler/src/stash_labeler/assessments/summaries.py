"""Section summaries: the evidence, prompt and schema for 1–4 step ranges, and the answer's validation.

Each requested range gets its own schema field (`range_1`…) whose first/last step ids are fixed to
that range, so every title, summary, objective, score and reason is bound to exactly one range.
Evidence per range is bounded: the requests in it and the latest one before it, its progress messages, evenly
sampled events, and up to eight preceding events for local context. A range holding no assistant
response or tool call is context: it is never scored, whatever the model or an older cache says.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stash_common.errors import InvalidArgument
from stash_common.steps import TraceStep
from stash_labeler.assessments.evidence import evenly, event_line, evidence_hash
from stash_labeler.assessments.fast_model import ModelFailure
from stash_labeler.sections.grouping import is_request

VERSION = 1
MAX_RANGES = 4
PRECEDING_EVENTS = 8
SAMPLED_EVENTS = 40
PROGRESS_MESSAGES = 12
TOOL = "record_section_assessments"
CONTEXT_REASON = "context: the section holds no assistant response or tool call, so it is not graded"
_TEXT_FIELDS = ("title", "summary", "objective", "reason")
PROMPT = """You assess sections of an AI agent's trace. For each section below, write a short title \
(at most eight words), a one or two sentence summary, the section's local objective (what this part of \
the work tried to achieve; do not assume the whole trace has one goal or use its title), a score from \
0 to 1 estimating how well the section achieved its local objective, and the reason for the score. \
An intermediate section can fully accomplish its own subtask. When a section spans several independent \
user requests, assess it against each of them separately and give their mean as the score, explaining \
each in the reason. When the evidence is not enough to judge, give a null score and say why in the reason. \
Record one field per section, with exactly its first and last step ids.

{sections}"""


@dataclass(frozen=True)
class StepRange:
    """A requested range and its steps."""

    first_step_id: str
    last_step_id: str
    steps: tuple[TraceStep, ...]
    preceding: tuple[TraceStep, ...]
    # The latest request before the range, however far back: the objective the range works toward.
    earlier_request: TraceStep | None = None

    @property
    def graded(self) -> bool:
        return any(step.is_action for step in self.steps)

    @property
    def key(self) -> dict[str, Any]:
        """The cache key: the range, its source and preceding-context hashes, the assessment version."""
        context = (*self.preceding, *_earlier_request(self))
        return {
            "first_step_id": self.first_step_id,
            "last_step_id": self.last_step_id,
            "source_hash": evidence_hash(self.steps),
            "context_hash": evidence_hash(context),
            "version": VERSION,
        }


def ranges_of(steps: Sequence[TraceStep], requested: Sequence[tuple[str, str]]) -> list[StepRange]:
    """The requested ranges of the trace; InvalidArgument naming the first range that is not one."""
    if not 1 <= len(requested) <= MAX_RANGES:
        raise InvalidArgument("ranges", f"send 1 to {MAX_RANGES} ranges")
    positions = {step.id: position for position, step in enumerate(steps)}
    ranges = []
    for number, (first, last) in enumerate(requested):
        if first not in positions or last not in positions:
            missing = first if first not in positions else last
            raise InvalidArgument(f"ranges[{number}]", f"step {missing!r} is not a step of this trace")
        start, end = positions[first], positions[last]
        if start > end:
            raise InvalidArgument(f"ranges[{number}]", f"first step {first!r} comes after last step {last!r}")
        preceding = tuple(steps[max(0, start - PRECEDING_EVENTS) : start])
        request = next((step for step in reversed(steps[:start]) if is_request(step)), None)
        ranges.append(StepRange(first, last, tuple(steps[start : end + 1]), preceding, request))
    return ranges


def prompt_and_schema(ranges: Sequence[StepRange]) -> tuple[str, dict[str, Any]]:
    """The prompt with each range's bounded evidence, and the tool schema with one field per range."""
    sections = "\n\n".join(_evidence(number, step_range) for number, step_range in enumerate(ranges, 1))
    properties = {f"range_{number}": _range_schema(r) for number, r in enumerate(ranges, 1)}
    schema = {"type": "object", "properties": properties, "required": list(properties)}
    return PROMPT.format(sections=sections), schema


def parse_answer(answer: Mapping[str, Any], ranges: Sequence[StepRange]) -> list[dict[str, Any]]:
    """The assessment of each range, in order; ModelFailure naming the first field that is wrong."""
    return [_assessment(answer.get(f"range_{number}"), number, r) for number, r in enumerate(ranges, 1)]


def shown(body: Mapping[str, Any], step_range: StepRange) -> dict[str, Any]:
    """A saved assessment as the API shows it: context sections stay unscored."""
    if step_range.graded:
        return dict(body)
    return {**body, "score": None, "reason": CONTEXT_REASON}


def _earlier_request(step_range: StepRange) -> tuple[TraceStep, ...]:
    return (step_range.earlier_request,) if step_range.earlier_request else ()


def _evidence(number: int, step_range: StepRange) -> str:
    requests = [step for step in (*_earlier_request(step_range), *step_range.steps) if is_request(step)]
    progress = [step for step in step_range.steps if step.role == "assistant" and not step.tool_name]
    parts = [
        f"## range_{number}: steps {step_range.first_step_id} to {step_range.last_step_id} "
        f"({len(step_range.steps)} steps)",
        "Requests:",
        *(event_line(step) for step in requests),
        "Progress messages:",
        *(event_line(step) for step in evenly(progress, PROGRESS_MESSAGES)),
        "Preceding events (context only):",
        *(event_line(step) for step in step_range.preceding),
        "Sampled events of the section:",
        *(event_line(step) for step in evenly(step_range.steps, SAMPLED_EVENTS)),
    ]
    return "\n".join(parts)


def _range_schema(step_range: StepRange) -> dict[str, Any]:
    text = {"type": "string"}
    return {
        "type": "object",
        "properties": {
            "first_step_id": {"type": "string", "const": step_range.first_step_id},
            "last_step_id": {"type": "string", "const": step_range.last_step_id},
            "title": text,
            "summary": text,
            "objective": text,
            "score": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
            "reason": text,
        },
        "required": ["first_step_id", "last_step_id", *_TEXT_FIELDS[:3], "score", "reason"],
    }


def _assessment(value: Any, number: int, step_range: StepRange) -> dict[str, Any]:
    field = f"range_{number}"
    if not isinstance(value, Mapping):
        raise ModelFailure(f"the answer has no {field} object")
    if (value.get("first_step_id"), value.get("last_step_id")) != (step_range.first_step_id, step_range.last_step_id):
        raise ModelFailure(f"{field} names other steps than {step_range.first_step_id}..{step_range.last_step_id}")
    for name in _TEXT_FIELDS:
        if not isinstance(value.get(name), str) or not value[name].strip():
            raise ModelFailure(f"{field}.{name} must be non-empty text")
    score = value.get("score")
    if score is not None and (isinstance(score, bool) or not isinstance(score, int | float) or not 0 <= score <= 1):
        raise ModelFailure(f"{field}.score must be a number from 0 to 1 or null, not {score!r}")
    return {name: value[name].strip() for name in _TEXT_FIELDS} | {"score": None if score is None else float(score)}
