"""The course-correction ledger: live tasks' events and OTLP traces' findings become corrections.

Live agents send events for a caller-chosen task id; the newest 50 per task are kept, analysed after
every request, and the most severe pattern not yet corrected in that task becomes the correction.
Traces that arrive over OTLP are also live tasks (task id = the OpenTelemetry trace id), so each of
their evaluated revisions may add one correction for an agent polling for it. The ledger's unique
(owner, task, fingerprint) makes "at most one per fingerprint per task" hold across concurrent
requests and replicas. The PRM is advisory: callers log any failure and answer with no correction.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import Session

from stash_common.db import utc_now
from stash_labeler import store
from stash_labeler.prm import (
    MAX_EVENTS,
    CourseCorrection,
    Finding,
    Pattern,
    ProcessModel,
    TrajectoryEvent,
    next_correction,
)
from stash_labeler.traces import LabelerTrace

OTLP_FORMAT = "otel"


def record_events(
    session: Session, model: ProcessModel, owner_id: str, task_id: str, events: Sequence[TrajectoryEvent]
) -> tuple[CourseCorrection | None, list[Pattern]]:
    """Append a live task's events, keep its newest 50, and return the correction to splice in and the patterns."""
    window = store.append_events(session, owner_id, task_id, events, keep=MAX_EVENTS)
    patterns = model.patterns(window)
    return record_correction(session, owner_id, task_id, patterns), patterns


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
    emitted = store.emitted_fingerprints(session, owner_id, task_id)
    correction = next_correction(task_id, patterns, emitted, utc_now())
    if correction is None or not store.add_correction(session, owner_id, correction):
        return None
    return correction
