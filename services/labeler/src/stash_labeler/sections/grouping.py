"""group_sections: the trace's steps as tasks → subtasks → steps, with immediate fallback titles.

Tasks: explicit task labels (`metadata["task"]` on steps) take precedence; without any, each user
request starts a task. Leading context before the first task boundary (a system prompt, setup messages)
stays with the first task, in recorded order; leading work (agent actions before any request, as after a
compaction) is a task of its own.
Subtasks inside a task: a recorded progress message (an assistant message followed by more tool
calls of the same task, or Codex's `phase: commentary`) starts one; in a task with no progress
message a recognised change of work does (see `work.py`). A boundary only splits once the current
subtask holds an action, so a request and its first progress message stay together. A task with a
single subtask has no children: it holds its steps directly. There is no count limit anywhere:
a continuous run stays one section, and distinct tasks are never merged. A section without an
assistant response or tool call is context (`graded` false). Step ids are the trace's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from stash_common.steps import TraceStep
from stash_common.titles import title_line
from stash_labeler.sections.work import Work, work_of

TASK_LABEL_KEY = "task"
_INTERRUPTIONS = ("[Request interrupted by user",)


@dataclass(frozen=True)
class Section:
    """A task or subtask: its steps in order, a fallback title and where that title came from."""

    kind: str  # "task" | "subtask"
    title: str
    title_source: str  # "label" | "request" | "progress" | "activity" | "context"
    step_ids: tuple[str, ...]
    graded: bool
    activity: str | None = None
    children: tuple[Section, ...] = ()

    @property
    def first_step_id(self) -> str:
        return self.step_ids[0]

    @property
    def last_step_id(self) -> str:
        return self.step_ids[-1]


def group_sections(steps: Sequence[TraceStep]) -> list[Section]:
    """The trace's tasks in step order; every step belongs to exactly one leaf."""
    return [_task(run, label) for label, run in _task_runs(list(steps))]


def is_request(step: TraceStep) -> bool:
    """A user message that asks for something (an interruption marker is none)."""
    return step.role == "user" and bool(step.content.strip()) and not step.content.startswith(_INTERRUPTIONS)


def _task_runs(steps: list[TraceStep]) -> list[tuple[str | None, list[TraceStep]]]:
    labelled = any(_label(step) for step in steps)
    runs: list[tuple[str | None, list[TraceStep]]] = []
    for step in steps:
        label = _label(step)
        if labelled:
            starts = label is not None and (not runs or label != runs[-1][0])
        else:
            starts = is_request(step)
        if starts or not runs:
            runs.append((label if labelled else None, []))
        runs[-1][1].append(step)
    return _with_leading_context_joined(runs, labelled)


def _with_leading_context_joined(
    runs: list[tuple[str | None, list[TraceStep]]], labelled: bool
) -> list[tuple[str | None, list[TraceStep]]]:
    """The runs with a leading run of context (before the first boundary, no agent action) joined to the next."""
    if len(runs) < 2:
        return runs
    (label, leading), (next_label, following) = runs[0], runs[1]
    before_first_boundary = label is None if labelled else not is_request(leading[0])
    if not before_first_boundary or any(step.is_action for step in leading):
        return runs
    return [(next_label, leading + following), *runs[2:]]


def _label(step: TraceStep) -> str | None:
    value = step.metadata.get(TASK_LABEL_KEY)
    return value.strip() if isinstance(value, str) and value.strip() else None


def _task(steps: list[TraceStep], label: str | None) -> Section:
    title, source = _task_title(steps, label)
    subtasks = _subtasks(steps)
    graded = any(step.is_action for step in steps)
    if source == "context" and graded:  # work without a recorded request (e.g. after a compaction)
        title, source = subtasks[0].title, subtasks[0].title_source
    children = tuple(subtasks) if len(subtasks) > 1 else ()
    return Section("task", title, source, tuple(step.id for step in steps), graded, children=children)


def _task_title(steps: list[TraceStep], label: str | None) -> tuple[str, str]:
    if label:
        return label, "label"
    request = next((step for step in steps if is_request(step)), None)
    if request is not None and title_line(request.content):
        return title_line(request.content), "request"
    return "Context", "context"


def _subtasks(steps: list[TraceStep]) -> list[Section]:
    progress = _progress_positions(steps)
    groups: list[list[TraceStep]] = [[]]
    current: Work | None = None
    for position, step in enumerate(steps):
        work = work_of(step)
        changes = position in progress or (not progress and _changes_work(current, work))
        if changes and any(earlier.is_action for earlier in groups[-1]):
            groups.append([])
            current = None
        groups[-1].append(step)
        current = current or work
    return [_subtask(group, progress_ids={steps[p].id for p in progress}) for group in groups]


def _progress_positions(steps: list[TraceStep]) -> set[int]:
    last_call = max((position for position, step in enumerate(steps) if step.is_tool_call), default=-1)
    return {
        position
        for position, step in enumerate(steps)
        if _is_message(step) and (position < last_call or step.metadata.get("phase") == "commentary")
    }


def _is_message(step: TraceStep) -> bool:
    return step.role == "assistant" and not step.is_tool_call and bool(step.content.strip())


def _changes_work(current: Work | None, work: Work | None) -> bool:
    return current is not None and work is not None and (work.kind, work.site) != (current.kind, current.site)


def _subtask(steps: list[TraceStep], progress_ids: set[str]) -> Section:
    ids = tuple(step.id for step in steps)
    graded = any(step.is_action for step in steps)
    works = [work for work in map(work_of, steps) if work is not None]
    activity = works[0].kind if works else None
    message = next((step for step in steps if step.id in progress_ids), None)
    if message is not None and title_line(message.content):
        return Section("subtask", title_line(message.content), "progress", ids, graded, activity)
    if works:
        return Section("subtask", works[0].title, "activity", ids, graded, activity)
    request = next((step for step in steps if is_request(step)), None)
    if request is not None and title_line(request.content):
        return Section("subtask", title_line(request.content), "request", ids, graded, activity)
    return Section("subtask", "Context" if not graded else "Response", "context", ids, graded, activity)
