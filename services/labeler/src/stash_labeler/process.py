"""The trajectory PRM at work in the labeler: findings in stored traces, course corrections for live agents.

Stored traces: every evaluated revision's tool calls become events, replayed through a task log of
50 events; each pattern is reported once, at the first window where it fired, with the steps that
window's matching events cover. Traces that arrive over OTLP are also live tasks (task id = the
OpenTelemetry trace id), so each revision may add one course correction to the ledger for an agent
polling for it.

Live agents send events for a caller-chosen task id; the newest 50 per task are kept, analysed after
every request, and the most severe pattern not yet corrected in that task becomes the correction.
The ledger's unique (owner, task, fingerprint) makes "at most one per fingerprint per task" hold
across concurrent requests and replicas. The PRM is advisory: any failure is logged and answered
with no correction, never with an error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog
from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from stash_common.db import utc_now
from stash_labeler import store
from stash_labeler.prm import (
    MAX_EVENTS,
    CourseCorrection,
    LLMTrajectoryClassifier,
    Pattern,
    PatternMatch,
    PRMConfig,
    StepEvent,
    TaskLog,
    TrajectoryEvent,
    analyze,
    events_from_steps,
    merge_patterns,
    next_correction,
    steps_covered,
)
from stash_labeler.prm.corrections import SUGGESTION_MAX_CHARS, SUGGESTIONS
from stash_labeler.traces import LabelerTrace

log = structlog.get_logger()
OTLP_FORMAT = "otel"


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


def save_findings(session: Session, trace: LabelerTrace, findings: Sequence[Finding]) -> None:
    """Replace the trace's findings with those of this revision."""
    session.execute(delete(store.ProcessFindingRow).where(store.ProcessFindingRow.trace_id == trace.id))
    for finding in findings:
        values = finding.as_json()
        values["suggestion"] = values["suggestion"][:SUGGESTION_MAX_CHARS]
        session.add(
            store.ProcessFindingRow(owner_id=trace.owner_id, trace_id=trace.id, revision=trace.revision, **values)
        )


def correct_otlp_trace(session: Session, trace: LabelerTrace, findings: Sequence[Finding]) -> None:
    """For a trace that arrived over OTLP, add the correction a polling agent should see next."""
    if trace.source_format != OTLP_FORMAT or not findings:
        return
    task_id = trace.external_id or trace.id
    record_correction(session, trace.owner_id, task_id, [finding.pattern for finding in findings])


def record_correction(
    session: Session, owner_id: str, task_id: str, patterns: Sequence[Pattern]
) -> CourseCorrection | None:
    """The correction for the most severe pattern this task has not been corrected for, recorded in the ledger."""
    emitted = set(
        session.scalars(
            select(store.CourseCorrectionRow.fingerprint).where(
                store.CourseCorrectionRow.owner_id == owner_id, store.CourseCorrectionRow.task_id == task_id
            )
        )
    )
    correction = next_correction(task_id, patterns, emitted, utc_now())
    if correction is None:
        return None
    try:
        with session.begin_nested():
            session.add(
                store.CourseCorrectionRow(
                    owner_id=owner_id,
                    task_id=task_id,
                    taxonomy=correction.taxonomy,
                    pattern=correction.pattern,
                    fingerprint=correction.fingerprint,
                    suggestion=correction.suggestion[:SUGGESTION_MAX_CHARS],
                    created_at=correction.created_at,
                )
            )
    except IntegrityError:  # a concurrent request emitted the same fingerprint first
        return None
    return correction


def record_events(
    session: Session, model: ProcessModel, owner_id: str, task_id: str, events: Sequence[TrajectoryEvent]
) -> tuple[CourseCorrection | None, list[Pattern]]:
    """Append a live task's events, keep its newest 50, and return the correction to splice in and the patterns."""
    key = (store.TrajectoryEventRow.owner_id == owner_id, store.TrajectoryEventRow.task_id == task_id)
    last = session.scalar(select(func.max(store.TrajectoryEventRow.seq)).where(*key)) or 0
    for offset, event in enumerate(events, start=1):
        session.add(store.TrajectoryEventRow(owner_id=owner_id, task_id=task_id, seq=last + offset, event=_json(event)))
    session.flush()
    newest = last + len(events)
    session.execute(delete(store.TrajectoryEventRow).where(*key, store.TrajectoryEventRow.seq <= newest - MAX_EVENTS))
    window = [
        _event(row.event)
        for row in session.scalars(select(store.TrajectoryEventRow).where(*key).order_by(store.TrajectoryEventRow.seq))
    ]
    patterns = model.patterns(window)
    return record_correction(session, owner_id, task_id, patterns), patterns


def latest_correction(session: Session, owner_id: str, task_id: str) -> CourseCorrection | None:
    """The newest correction emitted for a task."""
    row = session.scalar(
        select(store.CourseCorrectionRow)
        .where(store.CourseCorrectionRow.owner_id == owner_id, store.CourseCorrectionRow.task_id == task_id)
        .order_by(store.CourseCorrectionRow.created_at.desc())
        .limit(1)
    )
    if row is None:
        return None
    return CourseCorrection(
        task_id=row.task_id,
        taxonomy=row.taxonomy,
        pattern=row.pattern,
        suggestion=row.suggestion,
        created_at=row.created_at.replace(tzinfo=row.created_at.tzinfo or UTC),
    )


def _json(event: TrajectoryEvent) -> dict[str, Any]:
    return {
        "timestamp": event.timestamp.isoformat(),
        "role": event.role,
        "action": event.action,
        "target_files": list(event.target_files),
        "success": event.success,
        "duration_s": event.duration_s,
        "signature": event.signature,
    }


def _event(saved: dict[str, Any]) -> TrajectoryEvent:
    return TrajectoryEvent(
        timestamp=datetime.fromisoformat(saved["timestamp"]),
        role=saved["role"],
        action=saved["action"],
        target_files=tuple(saved["target_files"]),
        success=saved["success"],
        duration_s=saved["duration_s"],
        signature=saved.get("signature", ""),
    )
