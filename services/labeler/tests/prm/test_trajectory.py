"""TaskLog: the 50-event FIFO window, positions that survive eviction, and one correction per fingerprint."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stash_labeler.prm.events import TrajectoryEvent
from stash_labeler.prm.patterns import Pattern
from stash_labeler.prm.trajectory import MAX_EVENTS, TaskLog

START = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def event(number: int, action: str = "edit", success: bool = True) -> TrajectoryEvent:
    return TrajectoryEvent(START + timedelta(seconds=number), "agent", action, (f"f{number % 2}.py",), success, 0.5)


def test_log_keeps_the_last_fifty_events_oldest_first() -> None:
    log = TaskLog("task-1")
    for number in range(MAX_EVENTS + 7):
        log.append(event(number))
    assert MAX_EVENTS == 50
    assert len(log.events) == 50
    assert log.events[0] == event(7)
    assert log.events[-1] == event(56)
    assert log.appended == 57


def test_log_rejects_a_capacity_below_one() -> None:
    with pytest.raises(ValueError, match="capacity must be at least 1"):
        TaskLog("task-1", capacity=0)


def test_analyze_positions_count_every_event_ever_appended() -> None:
    log = TaskLog("task-1", capacity=4)
    for number in range(10):
        log.append(event(number))  # f0, f1, f0, f1, …: ping-pong
    matches = log.analyze()
    assert [match.pattern.name for match in matches] == ["ping_pong"]
    assert matches[0].positions == (6, 7, 8, 9)


def test_analyze_on_an_empty_log_finds_nothing() -> None:
    assert TaskLog("task-1").analyze() == []


def test_emit_correction_gives_each_fingerprint_once_per_task() -> None:
    log = TaskLog("task-1")
    at = datetime(2026, 5, 1, tzinfo=UTC)
    both = [Pattern(name="repetition_loop"), Pattern(name="stuck_on_test")]
    first = log.emit_correction(both, created_at=at)
    second = log.emit_correction(both, created_at=at)
    third = log.emit_correction(both, created_at=at)
    assert first is not None and first.fingerprint == "coordination_error:stuck_on_test"
    assert second is not None and second.fingerprint == "reasoning_error:repetition_loop"
    assert third is None
    assert log.emitted == {"coordination_error:stuck_on_test", "reasoning_error:repetition_loop"}


def test_emitted_fingerprints_are_per_task() -> None:
    pattern = [Pattern(name="ping_pong")]
    first, other = TaskLog("task-1"), TaskLog("task-2")
    assert first.emit_correction(pattern) is not None
    assert first.emit_correction(pattern) is None
    correction = other.emit_correction(pattern)
    assert correction is not None and correction.task_id == "task-2"


def test_repeated_dispatches_of_a_stuck_task_are_corrected_once() -> None:
    log = TaskLog("task-1")
    given = []
    for number in range(8):
        log.append(event(number, action="test", success=False))
        correction = log.emit_correction([match.pattern for match in log.analyze()])
        if correction is not None:
            given.append((number, correction.pattern))
    assert given == [(2, "stuck_on_test"), (3, "ping_pong")]


@given(
    st.integers(1, 8),
    st.lists(st.tuples(st.sampled_from(["edit", "test", "read"]), st.integers(0, 3), st.booleans()), max_size=40),
)
def test_window_and_positions_stay_consistent_under_eviction(capacity: int, specs: list[tuple[str, int, bool]]) -> None:
    log = TaskLog("task-1", capacity=capacity)
    appended = []
    for action, file_number, success in specs:
        appended.append(TrajectoryEvent(START, "agent", action, (f"f{file_number}.py",), success, 0.0))
        log.append(appended[-1])
        assert log.events == tuple(appended[-capacity:])
        for match in log.analyze():
            assert all(len(appended) - len(log.events) <= p < len(appended) for p in match.positions)
            assert match.positions[-1] == len(appended) - 1
