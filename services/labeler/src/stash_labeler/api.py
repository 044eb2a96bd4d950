"""LabelerServicer: proto ⇄ domain for the LabelerService; errors become statuses in the interceptor."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import grpc
from google.protobuf import struct_pb2, timestamp_pb2
from sqlalchemy.orm import Session, sessionmaker

from stash.rm.v1 import common_pb2, ingest_pb2, labeler_pb2, labeler_pb2_grpc
from stash_common.db import transaction
from stash_common.errors import InvalidArgument, NotFound
from stash_labeler import store
from stash_labeler.worker import EvaluationWorker

_STATUSES = {
    store.QUEUED: common_pb2.JOB_STATUS_QUEUED,
    store.RUNNING: common_pb2.JOB_STATUS_RUNNING,
    store.SUCCEEDED: common_pb2.JOB_STATUS_SUCCEEDED,
    store.FAILED: common_pb2.JOB_STATUS_FAILED,
}
_OUTCOMES = {
    "success": common_pb2.OUTCOME_SUCCESS,
    "failure": common_pb2.OUTCOME_FAILURE,
    "partial_success": common_pb2.OUTCOME_PARTIAL_SUCCESS,
    "insufficient_evidence": common_pb2.OUTCOME_INSUFFICIENT_EVIDENCE,
}
_SOURCES = {
    "imported": labeler_pb2.LABEL_SOURCE_IMPORTED,
    "llm": labeler_pb2.LABEL_SOURCE_LLM,
    "rules": labeler_pb2.LABEL_SOURCE_RULES,
}
MAX_BATCH = 500


class LabelerServicer(labeler_pb2_grpc.LabelerServiceServicer):
    """Evaluations of every owner's trace revisions, over gRPC."""

    def __init__(self, sessions: sessionmaker[Session], ingest: Any, worker: EvaluationWorker) -> None:
        self.sessions = sessions
        self.ingest = ingest
        self.worker = worker

    def AnnounceTraceRevision(self, request: Any, context: grpc.ServicerContext) -> Any:
        """Queue the revision's evaluation (once) and wake the workers."""
        if request.revision < 1 or not request.trace_id:
            raise InvalidArgument("revision", "an announcement names a trace and a revision of at least 1")
        with transaction(self.sessions) as session:
            queued = store.enqueue(session, _owner(request), request.trace_id, request.revision)
        if queued:
            self.worker.wake()
        return labeler_pb2.AnnounceTraceRevisionResponse()

    def RelabelTrace(self, request: Any, context: grpc.ServicerContext) -> Any:
        """Forget the trace's kept labels and evaluate its current revision again."""
        owner_id = _owner(request)
        revision = self._current_revision(owner_id, request.trace_id)
        with transaction(self.sessions) as session:
            store.forget_labels(session, request.trace_id)
            row = store.latest_evaluation(session, owner_id, request.trace_id, revision)
            if row is None:
                store.enqueue(session, owner_id, request.trace_id, revision)
            elif row.status != store.RUNNING:
                store.requeue(session, row)
        self.worker.wake()
        return labeler_pb2.RelabelTraceResponse(revision=revision, status=common_pb2.JOB_STATUS_QUEUED)

    def GetTraceEvaluation(self, request: Any, context: grpc.ServicerContext) -> Any:
        """The saved evaluation of a revision, or of the latest one evaluated."""
        revision = request.revision if request.HasField("revision") else None
        with transaction(self.sessions) as session:
            row = store.latest_evaluation(session, _owner(request), request.trace_id, revision, request.succeeded_only)
            evaluation = evaluation_to_proto(row) if row is not None else None
        return labeler_pb2.GetTraceEvaluationResponse(evaluation=evaluation)

    def BatchGetEvaluationSummaries(self, request: Any, context: grpc.ServicerContext) -> Any:
        """The newest succeeded score and outcome of each trace that has one, in request order."""
        if len(request.trace_ids) > MAX_BATCH:
            raise InvalidArgument("trace_ids", f"at most {MAX_BATCH} per call")
        with transaction(self.sessions) as session:
            rows = store.latest_succeeded(session, _owner(request), list(request.trace_ids))
            summaries = [_summary(rows[trace_id]) for trace_id in request.trace_ids if trace_id in rows]
        return labeler_pb2.BatchGetEvaluationSummariesResponse(summaries=summaries)

    def _current_revision(self, owner_id: str, trace_id: str) -> int:
        request = ingest_pb2.GetTraceRequest(owner_id=owner_id, trace_id=trace_id)
        try:
            return int(self.ingest.GetTrace(request, timeout=30).trace.revision)
        except grpc.RpcError as error:
            if error.code() == grpc.StatusCode.NOT_FOUND:
                raise NotFound(f"trace {trace_id} not found") from None
            raise


def _owner(request: Any) -> str:
    if not request.owner_id:
        raise InvalidArgument("owner_id", "every request must name the owner it acts for")
    return str(request.owner_id)


def _summary(row: store.EvaluationRow) -> Any:
    return labeler_pb2.EvaluationSummary(
        trace_id=row.trace_id,
        revision=row.revision,
        status=_STATUSES[row.status],
        trace_score=row.trace_score,
        outcome=_OUTCOMES.get(row.outcome or "", common_pb2.OUTCOME_UNSPECIFIED),
    )


def evaluation_to_proto(row: store.EvaluationRow) -> Any:
    """A saved evaluation as its message."""
    body = row.body or {"steps": [], "tasks": []}
    created_at = timestamp_pb2.Timestamp()
    created_at.FromDatetime(row.finished_at or row.created_at)
    return labeler_pb2.TraceEvaluation(
        trace_id=row.trace_id,
        revision=row.revision,
        status=_STATUSES[row.status],
        error=row.error,
        steps=[_step(step) for step in body["steps"]],
        task_scores=[labeler_pb2.TaskScore(**task) for task in body["tasks"]],
        trace_score=row.trace_score,
        outcome=_OUTCOMES.get(row.outcome or "", common_pb2.OUTCOME_UNSPECIFIED),
        created_at=created_at,
        labeler=row.labeler or "",
    )


def _step(step: Mapping[str, Any]) -> Any:
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
        message.credit_distribution.CopyFrom(_struct(step.get("credit_distribution") or {}))
    return message


def _struct(value: Mapping[str, Any]) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    message.update(value)
    return message
