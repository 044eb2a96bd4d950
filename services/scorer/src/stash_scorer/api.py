"""ScorerServicer: proto ⇄ domain for the ScorerService; errors become statuses in the interceptor.

Every method takes and returns the generated `scorer_pb2` types. Requests, worker reports and training
publications go to `runs.Scoring`, which reads peers through `stash_scorer.clients`; the reads of
scores and runs come straight from the store, scoped to the owner the gateway names.
"""

from __future__ import annotations

from collections.abc import Iterator

import grpc
from sqlalchemy.orm import Session, sessionmaker

from stash.rm.v1 import common_pb2, scorer_pb2, scorer_pb2_grpc
from stash_common.db import transaction
from stash_common.errors import InvalidArgument
from stash_common.messages import timestamp_of
from stash_common.requests import owner_of
from stash_scorer import store
from stash_scorer.owner_tables import stream_owner_rows
from stash_scorer.publishing import ActionResult
from stash_scorer.runs import RunReport, Scoring, TrainingScores

MAX_BATCH_TRACES = 500
_STATUSES = {
    store.QUEUED: common_pb2.JOB_STATUS_QUEUED,
    store.RUNNING: common_pb2.JOB_STATUS_RUNNING,
    store.SUCCEEDED: common_pb2.JOB_STATUS_SUCCEEDED,
    store.FAILED: common_pb2.JOB_STATUS_FAILED,
}
_REPORTED = (common_pb2.JOB_STATUS_SUCCEEDED, common_pb2.JOB_STATUS_FAILED)


class ScorerServicer(scorer_pb2_grpc.ScorerServiceServicer):
    """Every owner's trace scores, action scores and scoring runs, over gRPC."""

    def __init__(self, sessions: sessionmaker[Session], scoring: Scoring) -> None:
        self.sessions = sessions
        self.scoring = scoring

    def ScoreTrace(
        self, request: scorer_pb2.ScoreTraceRequest, context: grpc.ServicerContext
    ) -> scorer_pb2.ScoreTraceResponse:
        """The run covering the trace's current revision with the model: finished, active, or queued now."""
        run = self.scoring.request(owner_of(request), request.trace_id, request.reward_model_id)
        return scorer_pb2.ScoreTraceResponse(scoring_run=run_to_proto(run))

    def ListTraceScores(
        self, request: scorer_pb2.ListTraceScoresRequest, context: grpc.ServicerContext
    ) -> scorer_pb2.ListTraceScoresResponse:
        """A trace's latest raw score per reward model."""
        with transaction(self.sessions) as session:
            rows = store.trace_scores(session, owner_of(request), request.trace_id)
            return scorer_pb2.ListTraceScoresResponse(scores=[trace_score_to_proto(row) for row in rows])

    def ListActionScores(
        self, request: scorer_pb2.ListActionScoresRequest, context: grpc.ServicerContext
    ) -> scorer_pb2.ListActionScoresResponse:
        """A trace's latest action scores per reward model, in step order."""
        model_id = request.reward_model_id if request.HasField("reward_model_id") else None
        with transaction(self.sessions) as session:
            rows = store.action_scores(session, owner_of(request), request.trace_id, model_id)
            return scorer_pb2.ListActionScoresResponse(action_scores=[action_score_to_proto(row) for row in rows])

    def ListScoringRuns(
        self, request: scorer_pb2.ListScoringRunsRequest, context: grpc.ServicerContext
    ) -> scorer_pb2.ListScoringRunsResponse:
        """A trace's latest scoring run per reward model."""
        with transaction(self.sessions) as session:
            rows = store.latest_runs(session, owner_of(request), request.trace_id)
            return scorer_pb2.ListScoringRunsResponse(scoring_runs=[run_to_proto(row) for row in rows])

    def GetScoringRun(
        self, request: scorer_pb2.GetScoringRunRequest, context: grpc.ServicerContext
    ) -> scorer_pb2.GetScoringRunResponse:
        """One scoring run; another owner's is not found."""
        with transaction(self.sessions) as session:
            row = store.find_run(session, owner_of(request), request.scoring_run_id)
            return scorer_pb2.GetScoringRunResponse(scoring_run=run_to_proto(row))

    def BatchGetLatestScores(
        self, request: scorer_pb2.BatchGetLatestScoresRequest, context: grpc.ServicerContext
    ) -> scorer_pb2.BatchGetLatestScoresResponse:
        """The newest trace score of each listed trace that has one."""
        if len(request.trace_ids) > MAX_BATCH_TRACES:
            raise InvalidArgument("trace_ids", f"ask for at most {MAX_BATCH_TRACES} traces at once")
        with transaction(self.sessions) as session:
            latest = store.latest_trace_scores(session, owner_of(request), list(request.trace_ids))
            scores = {
                trace_id: common_pb2.LatestScore(
                    reward_model_id=row.reward_model_id, reward_model_name=row.reward_model_name, score=row.score
                )
                for trace_id, row in latest.items()
            }
        return scorer_pb2.BatchGetLatestScoresResponse(latest_scores=scores)

    def ReportScoringResult(
        self, request: scorer_pb2.ReportScoringResultRequest, context: grpc.ServicerContext
    ) -> scorer_pb2.ReportScoringResultResponse:
        """Publish a worker's result for one trace after validation, or fail its run with the reason."""
        run = self.scoring.report(report_from_proto(request))
        return scorer_pb2.ReportScoringResultResponse(scoring_run=run_to_proto(run))

    def PublishTrainingScores(
        self, request: scorer_pb2.PublishTrainingScoresRequest, context: grpc.ServicerContext
    ) -> scorer_pb2.PublishTrainingScoresResponse:
        """Publish a succeeded model's training scores, trace by trace, and make the model ready."""
        traces = [training_from_proto(item) for item in request.traces]
        published, rejected = self.scoring.publish_training(owner_of(request), request.reward_model_id, traces)
        return scorer_pb2.PublishTrainingScoresResponse(published_traces=published, rejected_traces=rejected)

    def StreamOwnerRows(
        self, request: common_pb2.StreamOwnerRowsRequest, context: grpc.ServicerContext
    ) -> Iterator[common_pb2.StreamOwnerRowsResponse]:
        """The owner's trace scores and action scores as Arrow IPC chunks, for the gateway's SQL queries."""
        for chunk in stream_owner_rows(self.sessions, owner_of(request)):
            yield common_pb2.StreamOwnerRowsResponse(table=chunk.table, arrow_ipc=chunk.data, version=chunk.version)

    def GetOwnerVersion(
        self, request: common_pb2.GetOwnerVersionRequest, context: grpc.ServicerContext
    ) -> common_pb2.GetOwnerVersionResponse:
        """The owner's change marker for the tables StreamOwnerRows sends."""
        with transaction(self.sessions) as session:
            return common_pb2.GetOwnerVersionResponse(version=store.owner_version(session, owner_of(request)))


def report_from_proto(request: scorer_pb2.ReportScoringResultRequest) -> RunReport:
    """A worker's report as a RunReport; only a succeeded or failed status can be reported."""
    if request.status not in _REPORTED:
        raise InvalidArgument("status", "must be JOB_STATUS_SUCCEEDED or JOB_STATUS_FAILED")
    return RunReport(
        owner_id=owner_of(request),
        run_id=request.scoring_run_id,
        job_id=request.job_id,
        trace_id=request.trace_id,
        trace_revision=request.trace_revision,
        succeeded=request.status == common_pb2.JOB_STATUS_SUCCEEDED,
        error=request.error if request.HasField("error") else None,
        permanent=request.permanent,
        actions=tuple(action_from_proto(item) for item in request.action_scores),
        trace_score=request.trace_score if request.HasField("trace_score") else None,
    )


def training_from_proto(message: scorer_pb2.TrainingTraceScores) -> TrainingScores:
    """One trace's training scores as TrainingScores."""
    return TrainingScores(
        trace_id=message.trace_id,
        trace_revision=message.trace_revision,
        trace_score=message.trace_score if message.HasField("trace_score") else None,
        actions=tuple(action_from_proto(item) for item in message.action_scores),
    )


def action_from_proto(message: scorer_pb2.ActionScoreResult) -> ActionResult:
    """A reported action score as an ActionResult."""
    return ActionResult(step_id=message.step_id, score=message.score, credit=message.credit)


def run_to_proto(row: store.ScoringRunRow) -> scorer_pb2.ScoringRun:
    """A scoring run row as its message."""
    return scorer_pb2.ScoringRun(
        id=row.id,
        trace_id=row.trace_id,
        reward_model_id=row.reward_model_id,
        status=_STATUSES[row.status],
        error=row.error,
        created_at=timestamp_of(row.created_at),
        started_at=timestamp_of(row.started_at),
        finished_at=timestamp_of(row.finished_at),
        trace_revision=row.trace_revision,
    )


def trace_score_to_proto(row: store.TraceScoreRow) -> scorer_pb2.TraceScore:
    """A trace score row as its message."""
    return scorer_pb2.TraceScore(
        reward_model_id=row.reward_model_id,
        reward_model_name=row.reward_model_name,
        score=row.score,
        created_at=timestamp_of(row.created_at),
    )


def action_score_to_proto(row: store.ActionScoreRow) -> scorer_pb2.ActionScore:
    """An action score row as its message."""
    return scorer_pb2.ActionScore(
        reward_model_id=row.reward_model_id,
        reward_model_name=row.reward_model_name,
        step_id=row.step_id,
        score=row.score,
        credit=row.credit,
        created_at=timestamp_of(row.created_at),
        trace_id=row.trace_id,
        step_index=row.step_index,
    )
