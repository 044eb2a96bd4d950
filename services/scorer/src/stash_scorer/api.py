"""ScorerServicer: proto ⇄ domain for the ScorerService; errors become statuses in the interceptor.

Every method takes and returns the generated `scorer_pb2` types. Requests, worker reports and training
publications go to `runs.Scoring`, which reads peers through `stash_scorer.clients`; the reads of
scores and runs come straight from the store, scoped to the owner the gateway names.
"""

from __future__ import annotations

from datetime import UTC

import grpc
from sqlalchemy.orm import Session, sessionmaker

from stash.rm.v1 import common_pb2, scorer_pb2, scorer_pb2_grpc
from stash_common.db import transaction
from stash_common.errors import InvalidArgument
from stash_common.messages import timestamp_of
from stash_common.owner_rpcs import OwnerRowsServicer
from stash_common.requests import owner_of
from stash_scorer import store
from stash_scorer.publishing import ActionResult
from stash_scorer.releases import Release, Releases
from stash_scorer.runs import RunReport, Scoring

MAX_BATCH_TRACES = 500
NO_RELEASE = "no shared evaluator released yet"
_STATUSES = {
    store.QUEUED: common_pb2.JOB_STATUS_QUEUED,
    store.RUNNING: common_pb2.JOB_STATUS_RUNNING,
    store.SUCCEEDED: common_pb2.JOB_STATUS_SUCCEEDED,
    store.FAILED: common_pb2.JOB_STATUS_FAILED,
}
_REPORTED = (common_pb2.JOB_STATUS_SUCCEEDED, common_pb2.JOB_STATUS_FAILED)


class ScorerServicer(OwnerRowsServicer, scorer_pb2_grpc.ScorerServiceServicer):
    """Every owner's trace scores, action scores and scoring runs, over gRPC."""

    owner_versions = store.OwnerVersionRow.__table__
    owner_tables = "stash_scorer.owner_tables"

    def __init__(self, sessions: sessionmaker[Session], scoring: Scoring, releases: Releases) -> None:
        self.sessions = sessions
        self.scoring = scoring
        self.releases = releases

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
        """Publish the training scores stored under the job's key, trace by trace, and make the model ready."""
        owner_id, model_id = owner_of(request), request.reward_model_id
        published, rejected = self.scoring.publish_training_job(owner_id, model_id, request.job_key)
        return scorer_pb2.PublishTrainingScoresResponse(published_traces=published, rejected_traces=rejected)

    def ForgetRewardModel(
        self, request: scorer_pb2.ForgetRewardModelRequest, context: grpc.ServicerContext
    ) -> scorer_pb2.ForgetRewardModelResponse:
        """Drop a deleted model's trace scores, action scores and runs; a worker's later report finds no run."""
        with transaction(self.sessions) as session:
            store.forget_model(session, owner_of(request), request.reward_model_id)
        return scorer_pb2.ForgetRewardModelResponse()

    def PublishEvaluatorRelease(
        self, request: scorer_pb2.PublishEvaluatorReleaseRequest, context: grpc.ServicerContext
    ) -> scorer_pb2.PublishEvaluatorReleaseResponse:
        """Record the shared evaluator's current release (a release or a rollback); repeating it changes nothing."""
        self.releases.publish(release_from_proto(request))
        return scorer_pb2.PublishEvaluatorReleaseResponse()

    def GetEvaluatorScores(
        self, request: scorer_pb2.GetEvaluatorScoresRequest, context: grpc.ServicerContext
    ) -> scorer_pb2.GetEvaluatorScoresResponse:
        """The shared evaluator's scores shown for one of the owner's traces, or why there are none."""
        owner_id = owner_of(request)
        with transaction(self.sessions) as session:
            current = store.current_release(session)
            shown = store.shown_shared_scores(session, owner_id, [request.trace_id], with_actions=True)
            scores = shown.get(request.trace_id)
            if scores is not None:
                return scorer_pb2.GetEvaluatorScoresResponse(
                    current_release=current.number if current else None, scores=shared_scores_to_proto(scores)
                )
            reason = unscored_reason(session, owner_id, request.trace_id, current)
        return scorer_pb2.GetEvaluatorScoresResponse(current_release=current.number if current else None, reason=reason)

    def BatchGetEvaluatorScores(
        self, request: scorer_pb2.BatchGetEvaluatorScoresRequest, context: grpc.ServicerContext
    ) -> scorer_pb2.BatchGetEvaluatorScoresResponse:
        """The shared evaluator's trace score shown for each listed trace that has one."""
        if len(request.trace_ids) > MAX_BATCH_TRACES:
            raise InvalidArgument("trace_ids", f"ask for at most {MAX_BATCH_TRACES} traces at once")
        with transaction(self.sessions) as session:
            current = store.current_release(session)
            shown = store.shown_shared_scores(session, owner_of(request), list(request.trace_ids), with_actions=False)
            return scorer_pb2.BatchGetEvaluatorScoresResponse(
                current_release=current.number if current else None,
                scores={trace_id: shared_scores_to_proto(scores) for trace_id, scores in shown.items()},
            )


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


def release_from_proto(request: scorer_pb2.PublishEvaluatorReleaseRequest) -> Release:
    """A publication as a Release; every field is required."""
    if not request.HasField("released_at"):
        raise InvalidArgument("released_at", "say when the release (or the rollback to it) took effect")
    return Release(request.number, request.job_key, request.released_at.ToDatetime(tzinfo=UTC))


def unscored_reason(session: Session, owner_id: str, trace_id: str, current: store.EvaluatorReleaseRow | None) -> str:
    """Why no release's scores are shown for the trace."""
    if current is None:
        return NO_RELEASE
    run = store.latest_release_run(session, owner_id, trace_id, current.number)
    if run is None:
        return f"release {current.number} has not scored this trace yet"
    if run.status == store.FAILED:
        return f"release {current.number} could not score this trace: {run.error}"
    return f"release {current.number} is scoring this trace ({run.status})"


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


def shared_scores_to_proto(scores: store.SharedScores) -> scorer_pb2.EvaluatorScores:
    """What one release published for one trace as its message."""
    return scorer_pb2.EvaluatorScores(
        release=scores.release_number,
        trace_score=scores.trace_score.score if scores.trace_score is not None else None,
        action_scores=[action_score_to_proto(row) for row in scores.actions],
        scored_at=timestamp_of(scores.scored_at),
        trace_revision=scores.trace_revision,
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
