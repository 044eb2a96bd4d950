"""Completion estimates: progress toward each independent user request, as checkpoints over sampled events.

The tasks are the trace's graded top-level sections (`group_sections`). The model sees at most
`MAX_EVENTS` sampled events: every request and assistant message first, then evenly spaced tool
evidence. Its answer is validated before it is kept: one field per task (`task_1`…) with that
task's step ids, checkpoints on sampled events inside the task in increasing step order, estimates
from 0 to 1 or null, and no progress at a request step (receiving a request earns none).
Regressions are allowed and the last checkpoint need not reach 1. A checkpoint on a tool result
moves to the tool call it answers, the row the trace explorer displays for the pair.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stash_common.steps import TraceStep
from stash_labeler.assessments.evidence import evenly, event_line, evidence_hash
from stash_labeler.assessments.fast_model import ModelFailure
from stash_labeler.sections.grouping import group_sections, is_request

VERSION = 1
MAX_EVENTS = 104
TOOL = "record_completion_estimates"
PROMPT = """Estimate how far an AI agent got with each independent user request of its trace. For each \
task below, state its objective and give checkpoints at sampled events inside the task: the fraction \
(0 to 1) of the request completed according to the evidence available at that event. Progress can go \
down (regressions happen) and the last checkpoint need not be 1: judge only what the evidence shows. \
Receiving a request is no progress. Use null when the evidence cannot support an estimate. Refer to \
events by their bracketed step ids, in increasing order.

Tasks:
{tasks}

Sampled events ({count} of {total} steps):
{events}"""


@dataclass(frozen=True)
class Task:
    """An independent request: its steps and the request text."""

    first_step_id: str
    last_step_id: str
    request: str


@dataclass(frozen=True)
class CompletionEvidence:
    """The tasks, the sampled events and the trace's steps by id."""

    tasks: tuple[Task, ...]
    sampled: tuple[TraceStep, ...]
    steps: tuple[TraceStep, ...]

    @property
    def source_hash(self) -> str:
        return evidence_hash(self.sampled)


def completion_evidence(steps: Sequence[TraceStep]) -> CompletionEvidence:
    """The tasks to estimate and at most `MAX_EVENTS` sampled events."""
    by_id = {step.id: step for step in steps}
    tasks = tuple(
        Task(section.first_step_id, section.last_step_id, _request_text(section.step_ids, by_id))
        for section in group_sections(steps)
        if section.graded
    )
    return CompletionEvidence(tasks, tuple(sample(steps)), tuple(steps))


def sample(steps: Sequence[TraceStep], limit: int = MAX_EVENTS) -> list[TraceStep]:
    """Requests and assistant messages kept (evenly thinned only past `limit`), tool evidence spaced evenly."""
    requests = [step for step in steps if is_request(step)]
    messages = [step for step in steps if step.role == "assistant" and not step.tool_name and step.content.strip()]
    kept = evenly(requests, limit)
    kept += evenly(messages, limit - len(kept))
    tools = [step for step in steps if step.is_tool_call or step.role == "tool"]
    kept += evenly(tools, limit - len(kept))
    order = {step.id: position for position, step in enumerate(steps)}
    return sorted(kept, key=lambda step: order[step.id])


def prompt_and_schema(evidence: CompletionEvidence) -> tuple[str, dict[str, Any]]:
    """The prompt over the sampled events, and the tool schema with one field per task."""
    tasks = "\n".join(
        f"task_{number}: steps {task.first_step_id} to {task.last_step_id}; request: {task.request}"
        for number, task in enumerate(evidence.tasks, 1)
    )
    prompt = PROMPT.format(
        tasks=tasks,
        count=len(evidence.sampled),
        total=len(evidence.steps),
        events="\n".join(event_line(step) for step in evidence.sampled),
    )
    properties = {f"task_{number}": _task_schema(task) for number, task in enumerate(evidence.tasks, 1)}
    return prompt, {"type": "object", "properties": properties, "required": list(properties)}


def parse_answer(answer: Mapping[str, Any], evidence: CompletionEvidence) -> list[dict[str, Any]]:
    """`[{first_step_id, last_step_id, objective, checkpoints: [{step_id, completion, reason}]}]`, validated."""
    return [
        _task(answer.get(f"task_{number}"), number, task, evidence) for number, task in enumerate(evidence.tasks, 1)
    ]


def _request_text(step_ids: Sequence[str], by_id: Mapping[str, TraceStep]) -> str:
    request = next((by_id[step_id] for step_id in step_ids if is_request(by_id[step_id])), None)
    return event_line(request).split(": ", 1)[1] if request else "(no recorded request)"


def _task_schema(task: Task) -> dict[str, Any]:
    checkpoint = {
        "type": "object",
        "properties": {
            "step_id": {"type": "string"},
            "completion": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
            "reason": {"type": "string"},
        },
        "required": ["step_id", "completion", "reason"],
    }
    return {
        "type": "object",
        "properties": {
            "first_step_id": {"type": "string", "const": task.first_step_id},
            "last_step_id": {"type": "string", "const": task.last_step_id},
            "objective": {"type": "string"},
            "checkpoints": {"type": "array", "items": checkpoint},
        },
        "required": ["first_step_id", "last_step_id", "objective", "checkpoints"],
    }


def _task(value: Any, number: int, task: Task, evidence: CompletionEvidence) -> dict[str, Any]:
    field = f"task_{number}"
    if not isinstance(value, Mapping):
        raise ModelFailure(f"the answer has no {field} object")
    if (value.get("first_step_id"), value.get("last_step_id")) != (task.first_step_id, task.last_step_id):
        raise ModelFailure(f"{field} names other steps than {task.first_step_id}..{task.last_step_id}")
    objective, checkpoints = value.get("objective"), value.get("checkpoints")
    if not isinstance(objective, str) or not objective.strip():
        raise ModelFailure(f"{field}.objective must be non-empty text")
    if not isinstance(checkpoints, list):
        raise ModelFailure(f"{field}.checkpoints must be a list")
    checked = _checkpoints(checkpoints, field, task, evidence)
    return {
        "first_step_id": task.first_step_id,
        "last_step_id": task.last_step_id,
        "objective": objective.strip(),
        "checkpoints": _displayed(checked, evidence),
    }


def _checkpoints(
    checkpoints: list[Any], field: str, task: Task, evidence: CompletionEvidence
) -> list[tuple[TraceStep, float | None, str]]:
    order = {step.id: position for position, step in enumerate(evidence.steps)}
    sampled = {step.id: step for step in evidence.sampled}
    low, high = order[task.first_step_id], order[task.last_step_id]
    checked: list[tuple[TraceStep, float | None, str]] = []
    for position, item in enumerate(checkpoints):
        where = f"{field}.checkpoints[{position}]"
        if not isinstance(item, Mapping):
            raise ModelFailure(f"{where} must be an object")
        step = sampled.get(item.get("step_id"))  # type: ignore[arg-type]
        if step is None or not low <= order[step.id] <= high:
            raise ModelFailure(f"{where}.step_id {item.get('step_id')!r} is no sampled event of this task")
        if checked and order[step.id] <= order[checked[-1][0].id]:
            raise ModelFailure(f"{where}.step_id {step.id!r} is out of order")
        completion = item.get("completion")
        if completion is not None and (
            isinstance(completion, bool) or not isinstance(completion, int | float) or not 0 <= completion <= 1
        ):
            raise ModelFailure(f"{where}.completion must be a number from 0 to 1 or null, not {completion!r}")
        if is_request(step) and completion:
            raise ModelFailure(f"{where} gives progress {completion} for receiving the request {step.id!r}")
        reason = item.get("reason")
        if not isinstance(reason, str):
            raise ModelFailure(f"{where}.reason must be text")
        checked.append((step, None if completion is None else float(completion), reason.strip()))
    return checked


def _displayed(
    checked: list[tuple[TraceStep, float | None, str]], evidence: CompletionEvidence
) -> list[dict[str, Any]]:
    """Tool results moved onto their calls; when both were checkpoints, the later evidence wins."""
    calls = {step.tool_call_id: step.id for step in evidence.steps if step.is_tool_call and step.tool_call_id}
    points: dict[str, dict[str, Any]] = {}
    for step, completion, reason in checked:
        shown = calls.get(step.tool_call_id, step.id) if step.role == "tool" and step.tool_call_id else step.id
        points.pop(shown, None)
        points[shown] = {"step_id": shown, "completion": completion, "reason": reason}
    order = {step.id: position for position, step in enumerate(evidence.steps)}
    return sorted(points.values(), key=lambda point: order[point["step_id"]])
