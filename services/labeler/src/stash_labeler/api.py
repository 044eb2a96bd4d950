"""LabelerServicer: proto ⇄ domain for the LabelerService; errors become statuses in the interceptor.

Each method decodes its request, calls the store, the correction ledger or the worker, and encodes
the generated response type. Messages go no further than this module: trajectory events arrive as
`TrajectoryEvent`s, and ingest is reached through the injected `TraceSource`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC
from typing import Any

import grpc
import structlog
from sqlalchemy.orm import Session, sessionmaker

from stash.rm.v1 import common_pb2, labeler_pb2, labeler_pb2_grpc
from stash_common.db import transaction, utc_now
from stash_common.errors import InvalidArgument, NotFound
from stash_common.messages import struct_of, timestamp_of
from stash_common.owner_rpcs import OwnerRowsServicer
from stash_common.requests import owner_of, page_of
from stash_labeler import store
from stash_labeler.assessments import Assessor, FastModel, Outcome
from stash_labeler.assessments.summaries import StepRange, shown
from stash_labeler.correction_ledger import record_events
from stash_labeler.evaluation_worker import EvaluationWorker
from stash_labeler.prm import PATTERN_NAMES, CourseCorrection, Pattern, TrajectoryEvent
from stash_labeler.sections import Section, group_sections
from stash_labeler.traces import LabelerTrace, TraceSource

log = structlog.get_logger()

_STATUSES: dict[str, common_pb2.JobStatus.ValueType] = {
    store.QUEUED: common_pb2.JOB_STATUS_QUEUED,
    store.RUNNING: common_pb2.JOB_STATUS_RUNNING,
    store.SUCCEEDED: common_pb2.JOB_STATUS_SUCCEEDED,
    store.FAILED: common_pb2.JOB_STATUS_FAILED,
}
_OUTCOMES: dict[str, common_pb2.Outcome.ValueType] = {
    "success": common_pb2.OUTCOME_SUCCESS,
    "failure": common_pb2.OUTCOME_FAILURE,
    "partial_success": common_pb2.OUTCOME_PARTIAL_SUCCESS,
    "insufficient_evidence": common_pb2.OUTCOME_INSUFFICIENT_EVIDENCE,
}
_SOURCES: dict[str, labeler_pb2.LabelSource.ValueType] = {
    "imported": labeler_pb2.LABEL_SOURCE_IMPORTED,
    "llm": labeler_pb2.LABEL_SOURCE_LLM,
    "rules": labeler_pb2.LABEL_SOURCE_RULES,
}
_PATTERN_SOURCES: dict[str, labeler_pb2.PatternSource.ValueType] = {
    "rules": labeler_pb2.PATTERN_SOURCE_RULES,
    "ml": labeler_pb2.PATTERN_SOURCE_ML,
}
MAX_BATCH = 500
MAX_EVENTS_PER_CALL = 500
ANNOUNCE_BATCH_MAX = 1000  # revisions AnnounceTraceRevisions queues in one call


class LabelerServicer(OwnerRowsServicer, labeler_pb2_grpc.LabelerServiceServicer):
    """Evaluations of every owner's trace revisions, over gRPC."""

    owner_versions = store.OwnerVersionRow.__table__
    owner_tables = "stash_labeler.owner_tables"

    def __init__(
        self,
        sessions: sessionmaker[Session],
        traces: TraceSource,
        worker: EvaluationWorker,
        fast_model: FastModel | None = None,
    ) -> None:
        self.sessions = sessions
        self.traces = traces
        self.worker = worker
        self.assessor = Assessor(sessions, fast_model)

    def AnnounceTraceRevision(
        self, request: labeler_pb2.AnnounceTraceRevisionRequest, context: grpc.ServicerContext
    ) -> labeler_pb2.AnnounceTraceRevisionResponse:
        """Queue the revision's evaluation (once) and wake the workers."""
        if request.revision < 1 or not request.trace_id:
            raise InvalidArgument("revision", "an announcement names a trace and a revision of at least 1")
        with transaction(self.sessions) as session:
            # Another owner's trace is not found: queued under this owner, its evaluation would find no trace
            # and forget everything the labeler keeps about that trace id, the real owner's labels included.
            if store.evaluated_for_another_owner(session, owner_of(request), request.trace_id):
                raise NotFound(f"trace {request.trace_id} not found")
            queued = store.enqueue(session, owner_of(request), request.trace_id, request.revision)
            if queued:
                store.touch_owners(session, [owner_of(request)])
        if queued:
            self.worker.wake()
        return labeler_pb2.AnnounceTraceRevisionResponse()

    def AnnounceTraceRevisions(
        self, request: labeler_pb2.AnnounceTraceRevisionsRequest, context: grpc.ServicerContext
    ) -> labeler_pb2.AnnounceTraceRevisionsResponse:
        """Queue the evaluations of one owner's revisions (each once) in one transaction and wake the workers;
        a trace that is another owner's is skipped, as AnnounceTraceRevision answers it not found."""
        owner_id = owner_of(request)
        if len(request.revisions) > ANNOUNCE_BATCH_MAX:
            raise InvalidArgument("revisions", f"at most {ANNOUNCE_BATCH_MAX} revisions a call")
        if any(item.revision < 1 or not item.trace_id for item in request.revisions):
            raise InvalidArgument("revisions", "each announcement names a trace and a revision of at least 1")
        with transaction(self.sessions) as session:
            queued = store.enqueue_revisions(session, owner_id, [(i.trace_id, i.revision) for i in request.revisions])
            if queued:
                store.touch_owners(session, [owner_id])
        if queued:
            self.worker.wake()
        return labeler_pb2.AnnounceTraceRevisionsResponse(queued=queued)

    def RelabelTrace(
        self, request: labeler_pb2.RelabelTraceRequest, context: grpc.ServicerContext
    ) -> labeler_pb2.RelabelTraceResponse:
        """Forget the trace's kept labels and evaluate its current revision again."""
        owner_id = owner_of(request)
        revision = self.traces.current_revision(owner_id, request.trace_id)
        with transaction(self.sessions) as session:
            store.forget_labels(session, request.trace_id)
            row = store.latest_evaluation(session, owner_id, request.trace_id, revision)
            if row is None:
                store.enqueue(session, owner_id, request.trace_id, revision)
                store.touch_owners(session, [owner_id])
            elif row.status != store.RUNNING:
                store.requeue(session, row.id)
        self.worker.wake()
        return labeler_pb2.RelabelTraceResponse(revision=revision, status=common_pb2.JOB_STATUS_QUEUED)

    def GetTraceEvaluation(
        self, request: labeler_pb2.GetTraceEvaluationRequest, context: grpc.ServicerContext
    ) -> labeler_pb2.GetTraceEvaluationResponse:
        """The saved evaluation of a revision, or of the latest one evaluated."""
        revision = request.revision if request.HasField("revision") else None
        with transaction(self.sessions) as session:
            row = store.latest_evaluation(
                session, owner_of(request), request.trace_id, revision, request.succeeded_only
            )
            evaluation = evaluation_to_proto(row) if row is not None else None
        return labeler_pb2.GetTraceEvaluationResponse(evaluation=evaluation)

    def BatchGetEvaluationSummaries(
        self, request: labeler_pb2.BatchGetEvaluationSummariesRequest, context: grpc.ServicerContext
    ) -> labeler_pb2.BatchGetEvaluationSummariesResponse:
        """The newest succeeded score and outcome of each trace that has one, in request order."""
        if len(request.trace_ids) > MAX_BATCH:
            raise InvalidArgument("trace_ids", f"at most {MAX_BATCH} per call")
        with transaction(self.sessions) as session:
            rows = store.latest_succeeded(session, owner_of(request), list(request.trace_ids))
            summaries = [_summary(rows[trace_id]) for trace_id in request.trace_ids if trace_id in rows]
        return labeler_pb2.BatchGetEvaluationSummariesResponse(summaries=summaries)

    def ListProcessPatterns(
        self, request: labeler_pb2.ListProcessPatternsRequest, context: grpc.ServicerContext
    ) -> labeler_pb2.ListProcessPatternsResponse:
        """Findings in the latest evaluated revision of the owner's traces, newest first."""
        pattern = request.pattern if request.HasField("pattern") else None
        if pattern is not None and pattern not in PATTERN_NAMES:
            raise InvalidArgument("pattern", f"unknown pattern {pattern!r}; one of {', '.join(PATTERN_NAMES)}")
        if len(request.trace_ids) > MAX_BATCH:
            raise InvalidArgument("trace_ids", f"at most {MAX_BATCH} per call")
        limit, offset = page_of(request.page)
        # Both trace filters hold when both are given; neither narrows anything when absent.
        trace_sets = [[request.trace_id]] if request.HasField("trace_id") else []
        trace_sets += [list(request.trace_ids)] if request.trace_ids else []
        with transaction(self.sessions) as session:
            rows, total = store.list_findings(session, owner_of(request), trace_sets, pattern, limit, offset)
            findings = [_finding_row(row) for row in rows]
        return labeler_pb2.ListProcessPatternsResponse(findings=findings, page_info=common_pb2.PageInfo(total=total))

    def RecordTrajectoryEvents(
        self, request: labeler_pb2.RecordTrajectoryEventsRequest, context: grpc.ServicerContext
    ) -> labeler_pb2.RecordTrajectoryEventsResponse:
        """Append a live task's events; answer the course correction to splice in, or none."""
        owner_id, events = owner_of(request), _events(request)
        if not 1 <= len(request.task_id) <= 200:
            raise InvalidArgument("task_id", "must be 1 to 200 characters")
        try:
            with transaction(self.sessions) as session:
                correction, patterns = record_events(
                    session, self.worker.process_model, owner_id, request.task_id, events
                )
        except Exception:  # the PRM is advisory: it never fails the agent's request
            log.exception("trajectory events not analysed", task_id=request.task_id)
            return labeler_pb2.RecordTrajectoryEventsResponse()
        return labeler_pb2.RecordTrajectoryEventsResponse(
            course_correction=_correction(correction) if correction else None,
            patterns=[_pattern(pattern) for pattern in patterns],
        )

    def GetCourseCorrection(
        self, request: labeler_pb2.GetCourseCorrectionRequest, context: grpc.ServicerContext
    ) -> labeler_pb2.GetCourseCorrectionResponse:
        """The newest correction emitted for a task (live, or an OTLP trace id), if any."""
        with transaction(self.sessions) as session:
            correction = store.latest_correction(session, owner_of(request), request.task_id)
        return labeler_pb2.GetCourseCorrectionResponse(
            course_correction=_correction(correction) if correction else None
        )

    def GetTraceCompletion(
        self, request: labeler_pb2.GetTraceCompletionRequest, context: grpc.ServicerContext
    ) -> labeler_pb2.GetTraceCompletionResponse:
        """Progress toward each independent request; NotFound for another owner's trace, before any cache read."""
        owner_id = owner_of(request)
        trace = self._current_trace(owner_id, request.trace_id)
        outcome = self.assessor.completion(owner_id, trace.id, trace.steps)
        tasks = [_completion_task(task) for task in (outcome.body or {}).get("tasks", [])]
        return labeler_pb2.GetTraceCompletionResponse(
            tasks=tasks, pending=outcome.pending, unavailable=outcome.unavailable, reason=outcome.reason
        )

    def GetTraceSections(
        self, request: labeler_pb2.GetTraceSectionsRequest, context: grpc.ServicerContext
    ) -> labeler_pb2.GetTraceSectionsResponse:
        """The current revision's tasks → subtasks → steps; NotFound for another owner's trace."""
        trace = self._current_trace(owner_of(request), request.trace_id)
        tasks = [_section(section) for section in group_sections(trace.steps)]
        return labeler_pb2.GetTraceSectionsResponse(tasks=tasks, revision=trace.revision)

    def SummarizeSections(
        self, request: labeler_pb2.SummarizeSectionsRequest, context: grpc.ServicerContext
    ) -> labeler_pb2.SummarizeSectionsResponse:
        """Title, summary, objective and score of 1 to 4 ranges; owner and ranges are checked before the cache."""
        owner_id = owner_of(request)
        trace = self._current_trace(owner_id, request.trace_id)
        requested = [(item.first_step_id, item.last_step_id) for item in request.ranges]
        answers = self.assessor.summaries(owner_id, trace.id, trace.steps, requested)
        return labeler_pb2.SummarizeSectionsResponse(
            summaries=[_section_summary(step_range, outcome) for step_range, outcome in answers]
        )

    def _current_trace(self, owner_id: str, trace_id: str) -> LabelerTrace:
        revision = self.traces.current_revision(owner_id, trace_id)
        return self.traces.trace_revision(owner_id, trace_id, revision)


def _section_summary(step_range: StepRange, outcome: Outcome) -> labeler_pb2.SectionSummary:
    body = shown(outcome.body, step_range) if outcome.body is not None else {}
    return labeler_pb2.SectionSummary(
        first_step_id=step_range.first_step_id,
        last_step_id=step_range.last_step_id,
        title=body.get("title", ""),
        summary=body.get("summary", ""),
        objective=body.get("objective", ""),
        score=body.get("score"),
        reason=body.get("reason", ""),
        pending=outcome.pending,
        unavailable=outcome.unavailable,
        unavailable_reason=outcome.reason,
    )


def _completion_task(task: Mapping[str, Any]) -> labeler_pb2.CompletionTask:
    return labeler_pb2.CompletionTask(
        first_step_id=task["first_step_id"],
        last_step_id=task["last_step_id"],
        objective=task["objective"],
        checkpoints=[labeler_pb2.CompletionCheckpoint(**point) for point in task["checkpoints"]],
    )


def _section(section: Section) -> labeler_pb2.TraceSection:
    return labeler_pb2.TraceSection(
        kind=section.kind,
        title=section.title,
        title_source=section.title_source,
        step_ids=section.step_ids,
        graded=section.graded,
        activity=section.activity,
        children=[_section(child) for child in section.children],
    )


def _events(request: labeler_pb2.RecordTrajectoryEventsRequest) -> list[TrajectoryEvent]:
    if not 1 <= len(request.events) <= MAX_EVENTS_PER_CALL:
        raise InvalidArgument("events", f"send 1 to {MAX_EVENTS_PER_CALL} events per call")
    events = []
    for position, event in enumerate(request.events):
        if not event.action:
            raise InvalidArgument(f"events[{position}].action", "must name the action (a tool name or verb)")
        try:
            events.append(
                TrajectoryEvent(
                    timestamp=event.timestamp.ToDatetime(tzinfo=UTC) if event.HasField("timestamp") else utc_now(),
                    role=event.role or "agent",
                    action=event.action,
                    target_files=tuple(event.target_files),
                    success=event.success,
                    duration_s=event.duration_s,
                )
            )
        except ValueError as error:
            raise InvalidArgument(f"events[{position}]", str(error)) from None
    return events


def _pattern(pattern: Pattern) -> labeler_pb2.Pattern:
    return labeler_pb2.Pattern(
        name=pattern.name,
        taxonomy=pattern.taxonomy,
        severity=pattern.severity,
        source=_PATTERN_SOURCES[pattern.source],
        confidence=pattern.confidence,
    )


def _correction(correction: CourseCorrection) -> labeler_pb2.CourseCorrection:
    return labeler_pb2.CourseCorrection(
        task_id=correction.task_id,
        taxonomy=correction.taxonomy,
        pattern=correction.pattern,
        suggestion=correction.suggestion,
        prompt_block=correction.prompt_block,
        fingerprint=correction.fingerprint,
        created_at=timestamp_of(correction.created_at),
    )


def _finding_json(trace_id: str, revision: int, finding: Mapping[str, Any]) -> labeler_pb2.ProcessFinding:
    return labeler_pb2.ProcessFinding(
        trace_id=trace_id,
        revision=revision,
        pattern=labeler_pb2.Pattern(
            name=finding["pattern"],
            taxonomy=finding["taxonomy"],
            severity=finding["severity"],
            source=_PATTERN_SOURCES[finding["source"]],
            confidence=finding.get("confidence"),
        ),
        first_step_id=finding["first_step_id"],
        last_step_id=finding["last_step_id"],
        first_step_index=finding["first_step_index"],
        last_step_index=finding["last_step_index"],
        suggestion=finding["suggestion"],
    )


def _finding_row(row: store.ProcessFindingRow) -> labeler_pb2.ProcessFinding:
    return _finding_json(
        row.trace_id,
        row.revision,
        {
            "pattern": row.pattern,
            "taxonomy": row.taxonomy,
            "severity": row.severity,
            "source": row.source,
            "confidence": row.confidence,
            "first_step_id": row.first_step_id,
            "last_step_id": row.last_step_id,
            "first_step_index": row.first_step_index,
            "last_step_index": row.last_step_index,
            "suggestion": row.suggestion,
        },
    )


def _summary(row: store.EvaluationRow) -> labeler_pb2.EvaluationSummary:
    return labeler_pb2.EvaluationSummary(
        trace_id=row.trace_id,
        revision=row.revision,
        status=_STATUSES[row.status],
        trace_score=row.trace_score,
        outcome=_OUTCOMES.get(row.outcome or "", common_pb2.OUTCOME_UNSPECIFIED),
    )


def evaluation_to_proto(row: store.EvaluationRow) -> labeler_pb2.TraceEvaluation:
    """A saved evaluation as its message."""
    body = row.body or {"steps": [], "tasks": []}
    return labeler_pb2.TraceEvaluation(
        trace_id=row.trace_id,
        revision=row.revision,
        status=_STATUSES[row.status],
        error=row.error,
        steps=[_step(step) for step in body["steps"]],
        task_scores=[labeler_pb2.TaskScore(**task) for task in body["tasks"]],
        trace_score=row.trace_score,
        outcome=_OUTCOMES.get(row.outcome or "", common_pb2.OUTCOME_UNSPECIFIED),
        created_at=timestamp_of(row.finished_at or row.created_at),
        labeler=row.labeler or "",
        process_patterns=[
            _finding_json(row.trace_id, row.revision, finding) for finding in body.get("process_patterns", [])
        ],
    )


def _step(step: Mapping[str, Any]) -> labeler_pb2.StepEvaluation:
    message = labeler_pb2.StepEvaluation(
        step_id=step["step_id"],
        step_index=step["step_index"],
        chunk_id=step["chunk_id"],
        label_source=_SOURCES.get(step.get("label_source") or "", labeler_pb2.LABEL_SOURCE_UNSPECIFIED),
        label_model=step.get("label_model"),
        expected_credit=step.get("expected_credit"),
        ordinal_credit=step.get("ordinal_credit"),
    )
    if "label" in step:
        message.label.CopyFrom(labeler_pb2.StepLabel(**step["label"]))
    if "reward" in step:
        reward = step["reward"]
        message.reward.CopyFrom(
            labeler_pb2.StepReward(
                points=reward["points"],
                passed_back=reward["passed_back"],
                credit=reward["credit"],
                terms=[labeler_pb2.RewardTerm(**term) for term in reward["terms"]],
            )
        )
        message.credit_distribution.CopyFrom(struct_of(step.get("credit_distribution") or {}))
    return message
