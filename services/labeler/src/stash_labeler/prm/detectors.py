"""The five rule detectors: pure functions of the trailing events, each returning a match or None.

| detector | fires when the last … |
|---|---|
| stuck_on_test | 3 events are failed test runs (action "test", or role "test_engineer") |
| expansion_drift | 3 events all failed and each targets a strict superset of the previous one's files |
| context_thrash | 5 events target 5 different file sets and no two neighbours share a file |
| ping_pong | 4 events alternate between exactly two different file sets (A, B, A, B) |
| repetition_loop | 3 events have the same role, action, target files and signature |

File sets compare as sets: the order in which a call names its files does not matter.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import structlog

from stash_labeler.prm.events import TrajectoryEvent
from stash_labeler.prm.patterns import PATTERN_NAMES, Pattern, PatternMatch, PatternName

log = structlog.get_logger(__name__)

Detector = Callable[[Sequence[TrajectoryEvent]], PatternMatch | None]

STUCK_ON_TEST_RUNS = 3
EXPANSION_DRIFT_EVENTS = 3
CONTEXT_THRASH_EVENTS = 5
PING_PONG_EVENTS = 4
REPETITION_LOOP_EVENTS = 3

_RULE_PATTERNS: Mapping[PatternName, Pattern] = {name: Pattern(name=name) for name in PATTERN_NAMES}


def detect_stuck_on_test(events: Sequence[TrajectoryEvent]) -> PatternMatch | None:
    """The last 3 events are failed test runs."""
    tail = _tail(events, STUCK_ON_TEST_RUNS)
    if tail and all(_is_test(event) and not event.success for event in tail):
        return _match("stuck_on_test", events, STUCK_ON_TEST_RUNS)
    return None


def detect_expansion_drift(events: Sequence[TrajectoryEvent]) -> PatternMatch | None:
    """The last 3 events failed while their set of target files strictly grew."""
    tail = _tail(events, EXPANSION_DRIFT_EVENTS)
    if not tail or any(event.success for event in tail):
        return None
    sets = [frozenset(event.target_files) for event in tail]
    if all(before < after for before, after in zip(sets, sets[1:], strict=False)):
        return _match("expansion_drift", events, EXPANSION_DRIFT_EVENTS)
    return None


def detect_context_thrash(events: Sequence[TrajectoryEvent]) -> PatternMatch | None:
    """The last 5 events target 5 distinct file sets, no two consecutive ones sharing a file."""
    tail = _tail(events, CONTEXT_THRASH_EVENTS)
    sets = [frozenset(event.target_files) for event in tail]
    if not tail or len(set(sets)) < CONTEXT_THRASH_EVENTS:
        return None
    if any(before & after for before, after in zip(sets, sets[1:], strict=False)):
        return None
    return _match("context_thrash", events, CONTEXT_THRASH_EVENTS)


def detect_ping_pong(events: Sequence[TrajectoryEvent]) -> PatternMatch | None:
    """The last 4 events alternate between exactly two distinct file sets."""
    tail = _tail(events, PING_PONG_EVENTS)
    sets = [frozenset(event.target_files) for event in tail]
    if not tail or sets[0] == sets[1]:
        return None
    if all(files == sets[index % 2] for index, files in enumerate(sets)):
        return _match("ping_pong", events, PING_PONG_EVENTS)
    return None


def detect_repetition_loop(events: Sequence[TrajectoryEvent]) -> PatternMatch | None:
    """The last 3 events are the same action by the same role on the same files."""
    tail = _tail(events, REPETITION_LOOP_EVENTS)
    if tail and len({_identity(event) for event in tail}) == 1:
        return _match("repetition_loop", events, REPETITION_LOOP_EVENTS)
    return None


DETECTORS: Mapping[PatternName, Detector] = {
    "stuck_on_test": detect_stuck_on_test,
    "expansion_drift": detect_expansion_drift,
    "context_thrash": detect_context_thrash,
    "ping_pong": detect_ping_pong,
    "repetition_loop": detect_repetition_loop,
}


def analyze(events: Sequence[TrajectoryEvent]) -> list[PatternMatch]:
    """Every detector's match on the events, most severe first; a failing detector is logged and skipped."""
    window = events if isinstance(events, list | tuple) else tuple(events)
    matches: list[PatternMatch] = []
    for name, detector in DETECTORS.items():
        try:
            match = detector(window)
        except Exception as error:  # the PRM is advisory: one broken detector must not stop the others
            log.warning("prm.detector_failed", detector=name, error=repr(error))
            continue
        if match is not None:
            matches.append(match)
    return sorted(matches, key=lambda match: -match.pattern.severity)


def _tail(events: Sequence[TrajectoryEvent], size: int) -> Sequence[TrajectoryEvent]:
    """The last `size` events, or nothing when there are fewer."""
    return events[-size:] if len(events) >= size else ()


def _is_test(event: TrajectoryEvent) -> bool:
    return event.action == "test" or event.role == "test_engineer"


def _identity(event: TrajectoryEvent) -> tuple[str, str, frozenset[str], str]:
    return event.role, event.action, frozenset(event.target_files), event.signature


def _match(name: PatternName, events: Sequence[TrajectoryEvent], size: int) -> PatternMatch:
    return PatternMatch(_RULE_PATTERNS[name], tuple(range(len(events) - size, len(events))))
