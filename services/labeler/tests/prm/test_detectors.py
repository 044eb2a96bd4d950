"""The five rule detectors and analyze(): thresholds, severities, taxonomy and order."""

from __future__ import annotations

from collections import deque
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stash_labeler.prm import detectors
from stash_labeler.prm.detectors import (
    analyze,
    detect_context_thrash,
    detect_expansion_drift,
    detect_ping_pong,
    detect_repetition_loop,
    detect_stuck_on_test,
)
from stash_labeler.prm.events import TrajectoryEvent

START = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def event(
    action: str = "edit",
    files: tuple[str, ...] = ("a.py",),
    success: bool = True,
    role: str = "agent",
    signature: str = "",
) -> TrajectoryEvent:
    return TrajectoryEvent(START, role, action, files, success, 1.0, signature)


def failed_test(files: tuple[str, ...] = ("tests/test_a.py",)) -> TrajectoryEvent:
    return event("test", files, success=False)


def names(events: list[TrajectoryEvent]) -> list[str]:
    return [match.pattern.name for match in analyze(events)]


# --- stuck_on_test ----------------------------------------------------------------------------


def test_stuck_on_test_fires_on_three_failed_test_runs_at_the_tail() -> None:
    events = [event("read"), failed_test(), failed_test(("tests/test_b.py",)), failed_test()]
    match = detect_stuck_on_test(events)
    assert match is not None
    assert (match.pattern.name, match.pattern.severity, match.pattern.taxonomy) == (
        "stuck_on_test",
        5,
        "coordination_error",
    )
    assert match.positions == (1, 2, 3)


def test_stuck_on_test_accepts_the_orchestrators_test_engineer_role() -> None:
    events = [event("review", (), success=False, role="test_engineer") for _ in range(3)]
    assert detect_stuck_on_test(events) is not None


def test_stuck_on_test_stays_quiet_below_three_failures() -> None:
    assert detect_stuck_on_test([failed_test(), failed_test()]) is None
    assert detect_stuck_on_test([event("test", success=True), failed_test(), failed_test()]) is None


def test_stuck_on_test_stays_quiet_when_a_success_or_another_action_is_interspersed() -> None:
    assert detect_stuck_on_test([failed_test(), event("test"), failed_test(), failed_test()]) is None
    assert detect_stuck_on_test([failed_test(), failed_test(), event("test")]) is None
    assert detect_stuck_on_test([failed_test(), event("edit", success=False), failed_test()]) is None


# --- expansion_drift --------------------------------------------------------------------------


def test_expansion_drift_fires_when_failed_events_target_a_strictly_growing_file_set() -> None:
    events = [
        event(files=("a.py",), success=False),
        event(files=("b.py", "a.py"), success=False),
        event(files=("a.py", "b.py", "c.py"), success=False),
    ]
    match = detect_expansion_drift(events)
    assert match is not None
    assert (match.pattern.severity, match.pattern.taxonomy, match.positions) == (4, "specification_error", (0, 1, 2))


def test_expansion_drift_stays_quiet_below_three_events() -> None:
    assert detect_expansion_drift([event(files=("a.py",), success=False), event(files=("a.py", "b.py"))]) is None
    two = [event(files=("a.py",), success=False), event(files=("a.py", "b.py"), success=False)]
    assert detect_expansion_drift(two) is None


def test_expansion_drift_stays_quiet_on_a_success_or_a_set_that_does_not_grow() -> None:
    growing = [("a.py",), ("a.py", "b.py"), ("a.py", "b.py", "c.py")]
    with_success = [event(files=files, success=index != 1) for index, files in enumerate(growing)]
    assert detect_expansion_drift(with_success) is None
    same = [event(files=("a.py", "b.py"), success=False) for _ in range(3)]
    assert detect_expansion_drift(same) is None
    not_superset = [event(files=files, success=False) for files in [("a.py",), ("a.py", "b.py"), ("c.py", "d.py")]]
    assert detect_expansion_drift(not_superset) is None


# --- context_thrash ---------------------------------------------------------------------------


def test_context_thrash_fires_on_five_unrelated_file_sets_in_a_row() -> None:
    events = [event(files=("x.py",))] + [event(files=(f"f{n}.py",)) for n in range(5)]
    match = detect_context_thrash(events)
    assert match is not None
    assert (match.pattern.severity, match.pattern.taxonomy, match.positions) == (
        3,
        "coordination_error",
        (1, 2, 3, 4, 5),
    )


def test_context_thrash_stays_quiet_below_five_events() -> None:
    assert detect_context_thrash([event(files=(f"f{n}.py",)) for n in range(4)]) is None


def test_context_thrash_stays_quiet_when_neighbours_share_a_file() -> None:
    files = [("a.py",), ("b.py",), ("b.py", "c.py"), ("d.py",), ("e.py",)]
    assert detect_context_thrash([event(files=names) for names in files]) is None


def test_context_thrash_needs_five_distinct_sets() -> None:
    # A, B, A, B, C: no neighbours overlap, but only three distinct sets.
    files = [("a.py",), ("b.py",), ("a.py",), ("b.py",), ("c.py",)]
    assert detect_context_thrash([event(files=names) for names in files]) is None


# --- ping_pong --------------------------------------------------------------------------------


def test_ping_pong_fires_on_four_alternating_file_sets() -> None:
    events = [event(files=("a.py",)), event(files=("b.py",)), event(files=("a.py",)), event(files=("b.py",))]
    match = detect_ping_pong(events)
    assert match is not None
    assert (match.pattern.severity, match.pattern.taxonomy, match.positions) == (2, "reasoning_error", (0, 1, 2, 3))


def test_ping_pong_compares_file_sets_not_their_order() -> None:
    sets = [("a.py", "b.py"), ("c.py",), ("b.py", "a.py"), ("c.py",)]
    assert detect_ping_pong([event(files=files) for files in sets]) is not None


def test_ping_pong_stays_quiet_below_four_events() -> None:
    assert detect_ping_pong([event(files=("a.py",)), event(files=("b.py",)), event(files=("a.py",))]) is None


def test_ping_pong_stays_quiet_without_strict_alternation_between_exactly_two_sets() -> None:
    for sets in ([("a",), ("b",), ("b",), ("a",)], [("a",), ("b",), ("a",), ("c",)], [("a",)] * 4):
        assert detect_ping_pong([event(files=files) for files in sets]) is None


# --- repetition_loop --------------------------------------------------------------------------


def test_repetition_loop_fires_on_the_same_action_three_times() -> None:
    events = [event("read", ("b.py",)), *[event("edit", ("a.py",), success=False) for _ in range(3)]]
    match = detect_repetition_loop(events)
    assert match is not None
    assert (match.pattern.severity, match.pattern.taxonomy, match.positions) == (1, "reasoning_error", (1, 2, 3))


def test_repetition_loop_stays_quiet_below_three_repeats() -> None:
    assert detect_repetition_loop([event(), event()]) is None
    assert detect_repetition_loop([event(), event(), event("read")]) is None


@pytest.mark.parametrize(
    "different",
    [
        event(role="reviewer"),
        event(action="read"),
        event(files=("b.py",)),
        event(signature="another-call"),
    ],
)
def test_repetition_loop_stays_quiet_when_role_action_files_or_signature_differ(different: TrajectoryEvent) -> None:
    assert detect_repetition_loop([event(), different, event()]) is None


# --- analyze ----------------------------------------------------------------------------------


def test_analyze_returns_nothing_for_no_or_healthy_events() -> None:
    assert analyze([]) == []
    assert analyze([event(files=("a.py",)), event("test", ("a.py",))]) == []


def test_analyze_ranks_simultaneous_patterns_by_severity() -> None:
    events = [failed_test() for _ in range(3)]  # stuck on test, and the same call three times
    matches = analyze(events)
    assert [match.pattern.name for match in matches] == ["stuck_on_test", "repetition_loop"]
    assert [match.pattern.source for match in matches] == ["rules", "rules"]


def test_analyze_skips_a_failing_detector_and_keeps_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(events: object) -> None:
        raise RuntimeError("detector bug")

    monkeypatch.setitem(detectors.DETECTORS, "stuck_on_test", broken)  # type: ignore[arg-type]
    assert names([failed_test() for _ in range(3)]) == ["repetition_loop"]


def test_analyze_accepts_a_deque_which_cannot_be_sliced() -> None:
    window = deque([failed_test() for _ in range(3)], maxlen=50)
    assert [match.pattern.name for match in analyze(window)] == ["stuck_on_test", "repetition_loop"]


events_strategy = st.lists(
    st.builds(
        TrajectoryEvent,
        timestamp=st.integers(0, 10**6).map(lambda s: START + timedelta(seconds=s)),
        role=st.sampled_from(["agent", "test_engineer", "a2898e3"]),
        action=st.sampled_from(["edit", "read", "test", "run", "search"]),
        target_files=st.lists(st.sampled_from(["a.py", "b.py", "c.py", "d.py", "e.py", "f.py"]), max_size=4).map(tuple),
        success=st.booleans(),
        duration_s=st.floats(0, 1e4, allow_nan=False),
        signature=st.sampled_from(["", "x", "y"]),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(events_strategy)
def test_analyze_is_total_and_sorted_by_severity(events: list[TrajectoryEvent]) -> None:
    matches = analyze(events)
    severities = [match.pattern.severity for match in matches]
    assert severities == sorted(severities, reverse=True)
    assert len({match.pattern.name for match in matches}) == len(matches)
    for match in matches:
        assert all(0 <= position < len(events) for position in match.positions)
        assert match.positions == tuple(range(len(events) - len(match.positions), len(events)))
