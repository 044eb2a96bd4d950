"""TaskLog: one task's trailing events (at most 50, oldest evicted first) and the corrections it was given.

The log is in memory and not thread-safe: one worker handles a task from start to end.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from datetime import datetime

from stash_labeler.prm.corrections import CourseCorrection, next_correction
from stash_labeler.prm.detectors import analyze
from stash_labeler.prm.events import TrajectoryEvent
from stash_labeler.prm.patterns import Pattern, PatternMatch

MAX_EVENTS = 50


class TaskLog:
    """The trailing window of a task's trajectory, analysed after each append."""

    def __init__(self, task_id: str, capacity: int = MAX_EVENTS) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.task_id = task_id
        self._events: deque[TrajectoryEvent] = deque(maxlen=capacity)
        self._appended = 0
        self._emitted: set[str] = set()

    def append(self, event: TrajectoryEvent) -> None:
        """Record an event, evicting the oldest when the log is full."""
        self._events.append(event)
        self._appended += 1

    @property
    def events(self) -> tuple[TrajectoryEvent, ...]:
        """The events kept, oldest first."""
        return tuple(self._events)

    @property
    def appended(self) -> int:
        """How many events were ever appended, evicted ones included."""
        return self._appended

    @property
    def emitted(self) -> frozenset[str]:
        """The fingerprints of the corrections this task was given."""
        return frozenset(self._emitted)

    def analyze(self) -> list[PatternMatch]:
        """The patterns in the kept events, most severe first.

        Positions count every event ever appended (0 is the first), so they stay valid after eviction.
        """
        offset = self._appended - len(self._events)
        matches = analyze(self.events)
        if offset == 0:
            return matches
        return [PatternMatch(match.pattern, tuple(offset + p for p in match.positions)) for match in matches]

    def emit_correction(
        self, patterns: Sequence[Pattern], created_at: datetime | None = None
    ) -> CourseCorrection | None:
        """The correction for the most severe pattern not yet corrected in this task, recorded as given."""
        correction = next_correction(self.task_id, patterns, self._emitted, created_at)
        if correction is not None:
            self._emitted.add(correction.fingerprint)
        return correction
