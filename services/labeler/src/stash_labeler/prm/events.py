"""Trajectory events: one per tool call of an agent, derived from a stored trace's steps.

How `events_from_steps` reads a trace:

- Every assistant step with a `tool_name` is a call. Its result is the later `tool` step with the
  same `tool_call_id`; a call without an id takes the next unclaimed `tool` step of the same tool
  that has no id (or an id no call carries). A call may have no result.
- A Codex `write_stdin` poll of a command that is still running (its result said "Process running
  with session ID N") is no event of its own: it extends that command's event, whose outcome
  becomes the poll's result. So `exec_command` → `write_stdin` → exit code 1 is one failed test run.
- action: the call's verb (edit, read, test, run or search) and target_files: the files it names,
  both from `calls.py` (shell commands: `commands.py`); the tool name stays on the StepEvent.
- signature: a digest of the tool name and input (`calls.call_signature`), so that three different
  searches are not "the same call three times" while three identical ones are.
- success: False when the result step has `metadata["is_error"]` true or a non-zero
  `metadata["exit_code"]`; True otherwise, and when there is no result.
- timestamp: the call step's `metadata["timestamp"]` (ISO 8601; one without a zone is read as UTC).
  An untimed call gets the Unix epoch plus its step index in seconds, which keeps the order.
- duration_s: result time minus call time, never negative; 0 when either is untimed.
- role: the call step's `metadata["agent_id"]` (a Claude Code subagent), else the `role` argument
  ("agent" by default; pass the trace's `agent_id` for a subagent's own transcript).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from stash_common.steps import TraceStep
from stash_labeler.prm.calls import call_signature, describe_call

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_RUNNING = re.compile(r"Process running with session ID (\d+)")
_POLL_TOOLS = frozenset({"write_stdin"})


@dataclass(frozen=True)
class TrajectoryEvent:
    """One action of an agent: who did what to which files, whether it worked and how long it took.

    `signature` tells apart two actions with the same verb and files (two different searches); it is
    empty for events made by hand, where (role, action, target_files) alone identifies an action.
    """

    timestamp: datetime
    role: str
    action: str
    target_files: tuple[str, ...]
    success: bool
    duration_s: float
    signature: str = ""

    def __post_init__(self) -> None:
        if self.timestamp.tzinfo is None or self.timestamp.utcoffset() is None:
            raise ValueError(f"timestamp must be timezone-aware, got {self.timestamp!r}; add tzinfo=UTC")
        if not math.isfinite(self.duration_s) or self.duration_s < 0:
            raise ValueError(f"duration_s must be a finite number ≥ 0, got {self.duration_s!r}")
        if not isinstance(self.target_files, tuple):
            object.__setattr__(self, "target_files", tuple(self.target_files))


@dataclass(frozen=True)
class StepEvent:
    """An event and the trace steps it came from (the call, and its final result when there is one)."""

    event: TrajectoryEvent
    tool_name: str
    call_index: int
    call_id: str
    result_index: int | None = None
    result_id: str | None = None

    @property
    def last_index(self) -> int:
        """The index of the last step this event covers."""
        return self.call_index if self.result_index is None else max(self.call_index, self.result_index)


@dataclass
class _Call:
    """A call being assembled: its latest result and the polls folded into it."""

    call: TraceStep
    result: TraceStep | None
    polls: list[TraceStep] = field(default_factory=list)


def events_from_steps(steps: Sequence[TraceStep], role: str = "agent") -> list[StepEvent]:
    """One event per tool call of the steps, in call order (see the module docstring for the rules)."""
    results = _pair_results(steps)
    calls: list[_Call] = []
    sessions: dict[int, _Call] = {}
    for position, step in enumerate(steps):
        if not step.is_tool_call:
            continue
        result, polled = results.get(position), _polled_session(step)
        item = sessions.get(polled) if polled is not None else None
        if item is None:
            item = _Call(step, result)
            calls.append(item)
        else:
            item.polls.append(step)
            item.result = result or item.result
        running = _running_session(result)
        if running is not None:
            sessions[running] = item
    return [_step_event(call, role) for call in calls]


def steps_covered(step_events: Sequence[StepEvent], positions: Iterable[int]) -> tuple[int, int]:
    """The first and last step index covered by the events at `positions` (as in a PatternMatch)."""
    chosen = [step_events[position] for position in positions]
    if not chosen:
        raise ValueError("positions is empty: a pattern covers at least one event")
    return min(item.call_index for item in chosen), max(item.last_index for item in chosen)


def _pair_results(steps: Sequence[TraceStep]) -> dict[int, TraceStep]:
    """The result step of each call, keyed by the call's position."""
    call_ids = {step.tool_call_id for step in steps if step.is_tool_call and step.tool_call_id}
    waiting: defaultdict[tuple[str, str | None], deque[int]] = defaultdict(deque)
    for position, step in enumerate(steps):
        if step.role == "tool":
            waiting[_result_key(step, call_ids)].append(position)
    pairs: dict[int, TraceStep] = {}
    for position, step in enumerate(steps):
        if not step.is_tool_call:
            continue
        queue = waiting.get(("id", step.tool_call_id) if step.tool_call_id else ("name", step.tool_name))
        while queue and queue[0] < position:
            queue.popleft()  # a result before its call answers some earlier call
        if queue:
            pairs[position] = steps[queue.popleft()]
    return pairs


def _result_key(step: TraceStep, call_ids: set[str]) -> tuple[str, str | None]:
    if step.tool_call_id and step.tool_call_id in call_ids:
        return "id", step.tool_call_id
    return "name", step.tool_name


def _step_event(item: _Call, role: str) -> StepEvent:
    call, result = item.call, item.result
    tool_name = call.tool_name or ""
    action, target_files = describe_call(tool_name, call.tool_input)
    event = TrajectoryEvent(
        timestamp=_moment(call) or EPOCH + timedelta(seconds=call.index),
        role=_role(call, role),
        action=action,
        target_files=target_files,
        success=_succeeded(result),
        duration_s=_duration(call, result),
        signature=call_signature(tool_name, call.tool_input),
    )
    last = max([*item.polls, *([result] if result else [])], key=lambda step: step.index, default=None)
    return StepEvent(event, tool_name, call.index, call.id, last.index if last else None, last.id if last else None)


def _role(call: TraceStep, default: str) -> str:
    agent = call.metadata.get("agent_id")
    return agent if isinstance(agent, str) and agent else default


def _succeeded(result: TraceStep | None) -> bool:
    if result is None:
        return True
    if result.metadata.get("is_error") is True:
        return False
    return _exit_code(result.metadata.get("exit_code")) in (None, 0)


def _exit_code(value: Any) -> float | None:
    """An exit code as a number; protobuf Structs carry 1 as 1.0, some sources write "1"."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return value
    try:
        return float(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _moment(step: TraceStep) -> datetime | None:
    text = step.metadata.get("timestamp")
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _duration(call: TraceStep, result: TraceStep | None) -> float:
    started, ended = _moment(call), _moment(result) if result is not None else None
    if started is None or ended is None:
        return 0.0
    return max(0.0, (ended - started).total_seconds())


def _running_session(result: TraceStep | None) -> int | None:
    found = _RUNNING.search(result.content) if result is not None else None
    return int(found.group(1)) if found else None


def _polled_session(step: TraceStep) -> int | None:
    """The session a write_stdin call polls; Structs carry its id as a float."""
    if (step.tool_name or "").lower() not in _POLL_TOOLS:
        return None
    session = (step.tool_input or {}).get("session_id")
    if isinstance(session, bool) or not isinstance(session, int | float | str):
        return None
    try:
        return int(float(session))
    except ValueError:
        return None
