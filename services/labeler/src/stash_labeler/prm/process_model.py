"""ProcessModel: the trajectory PRM as the labeler runs it, over a live window or a stored trace.

A live window's patterns are the rule detectors' matches, then what the LLM classifier adds when the
strategy is `rules+ml`. A stored trace's tool calls become events replayed through a task log of
50 events; each pattern is reported once, as a `Finding` at the first window where it fired, with
the steps that window's matching events cover. Nothing here reads or writes the database: the
evaluation worker keeps the findings with `store.save_evaluations`, and `correction_ledger.py`
turns patterns into the corrections it records.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from stash_labeler.prm.classifier import LLMTrajectoryClassifier, merge_patterns
from stash_labeler.prm.config import PRMConfig
from stash_labeler.prm.corrections import SUGGESTIONS
from stash_labeler.prm.detectors import analyze
from stash_labeler.prm.events import StepEvent, TrajectoryEvent, events_from_steps, steps_covered
from stash_labeler.prm.patterns import Pattern, PatternMatch
from stash_labeler.prm.trajectory import MAX_EVENTS, TaskLog
from stash_labeler.traces import LabelerTrace


@dataclass(frozen=True)
class Finding:
    """A pattern found in a stored trace, with the steps it covers and what to do about it."""

    pattern: Pattern
    first_step_index: int
    last_step_index: int
    first_step_id: str
    last_step_id: str

    @property
    def suggestion(self) -> str:
        """The default course correction for the pattern."""
        return SUGGESTIONS[self.pattern.name]

    def as_json(self) -> dict[str, Any]:
        """The finding as saved in an evaluation's body."""
        return {
            "pattern": self.pattern.name,
            "taxonomy": self.pattern.taxonomy,
            "severity": self.pattern.severity,
            "source": self.pattern.source,
            "confidence": self.pattern.confidence,
            "first_step_id": self.first_step_id,
            "last_step_id": self.last_step_id,
            "first_step_index": self.first_step_index,
            "last_step_index": self.last_step_index,
            "suggestion": self.suggestion,
        }


class ProcessModel:
    """The five rule detectors, and the LLM classifier when the strategy is `rules+ml`."""

    def __init__(self, config: PRMConfig | None = None, classifier: LLMTrajectoryClassifier | None = None) -> None:
        self.config = config or PRMConfig()
        if self.config.strategy == "rules+ml" and classifier is None:
            raise ValueError('strategy "rules+ml" needs an LLM classifier')
        self.classifier = classifier if self.config.strategy == "rules+ml" else None

    def patterns(self, events: Sequence[TrajectoryEvent]) -> list[Pattern]:
        """The patterns of a window: the rules first, then what the classifier adds."""
        found = [match.pattern for match in analyze(events)]
        if self.classifier is None:
            return found
        return merge_patterns(found, asyncio.run(self.classifier.classify(events)))

    def trace_findings(self, trace: LabelerTrace) -> list[Finding]:
        """Each pattern once, where it first fired, most severe first."""
        step_events = events_from_steps(trace.steps)
        first_matches: dict[str, PatternMatch] = {}
        task_log = TaskLog(trace.id)
        for item in step_events:
            task_log.append(item.event)
            for match in task_log.analyze():
                first_matches.setdefault(match.pattern.name, match)
        if self.classifier is not None and step_events:
            last_window = tuple(range(max(0, len(step_events) - MAX_EVENTS), len(step_events)))
            window = [item.event for item in step_events[last_window[0] :]]
            for pattern in asyncio.run(self.classifier.classify(window)):
                first_matches.setdefault(pattern.name, PatternMatch(pattern, last_window))
        findings = [_finding(trace, step_events, match) for match in first_matches.values()]
        return sorted(findings, key=lambda finding: -finding.pattern.severity)


def _finding(trace: LabelerTrace, step_events: Sequence[StepEvent], match: PatternMatch) -> Finding:
    first, last = steps_covered(step_events, match.positions)
    by_index = {step.index: step for step in trace.steps}
    return Finding(match.pattern, first, last, by_index[first].id, by_index[last].id)
