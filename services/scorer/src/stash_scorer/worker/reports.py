"""Reports to `ScorerService.ReportScoringResult`, one per trace, over real gRPC.

Each trace is reported the moment it is scored, so a batch publishes trace by trace and a crash
loses only the traces not yet done (the service fails those when the worker exits). A report the
service refuses (its validation failed the run) is logged and not retried; an unreachable service is
retried a few times, then left to that exit check.
"""

from __future__ import annotations

import logging
import time
from types import TracebackType

import grpc

from stash.rm.v1 import common_pb2, scorer_pb2, scorer_pb2_grpc
from stash_common.channels import open_channel
from stash_scorer.job_contract import ScoreJob, ScoreRun
from stash_scorer.worker.traces import TraceResult

LOG = logging.getLogger(__name__)
REPORT_TIMEOUT_S = 30.0
RETRY_DELAYS_S = (0.5, 1.0, 2.0)  # after each failed attempt to reach the service
RETRIED_CODES = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})


class Reporter:
    """Sends one report per run of `job` and remembers which runs the service has heard about."""

    def __init__(self, job: ScoreJob) -> None:
        self._job = job
        self._channel = open_channel(job.scorer_address, wait_for_ready=True)
        self._stub = scorer_pb2_grpc.ScorerServiceStub(self._channel)
        self._reported: set[str] = set()

    def __enter__(self) -> Reporter:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._channel.close()

    def succeeded(self, result: TraceResult) -> None:
        """Report a scored trace: every action's score and credit, and the trace score when there is one."""
        request = self._request(result.run, common_pb2.JOB_STATUS_SUCCEEDED)
        request.action_scores.extend(
            scorer_pb2.ActionScoreResult(step_id=action.step_id, score=action.score, credit=action.credit)
            for action in result.actions
        )
        if result.trace_score is not None:
            request.trace_score = result.trace_score
        self._send(result.run, request)

    def failed(self, run: ScoreRun, error: str, permanent: bool) -> None:
        """Report that a trace could not be scored, and whether retrying can help."""
        request = self._request(run, common_pb2.JOB_STATUS_FAILED)
        request.error, request.permanent = error, permanent
        self._send(run, request)

    def fail_unreported(self, error: str, permanent: bool) -> None:
        """Report every run the service has not heard about yet as failed (the whole job failed)."""
        for run in self._job.runs:
            if run.scoring_run_id not in self._reported:
                self.failed(run, error, permanent)

    def _request(self, run: ScoreRun, status: common_pb2.JobStatus.ValueType) -> scorer_pb2.ReportScoringResultRequest:
        return scorer_pb2.ReportScoringResultRequest(
            owner_id=run.owner_id,
            scoring_run_id=run.scoring_run_id,
            job_id=self._job.job_id,
            trace_id=run.trace_id,
            trace_revision=run.trace_revision,
            status=status,
        )

    def _send(self, run: ScoreRun, request: scorer_pb2.ReportScoringResultRequest) -> None:
        for delay in (*RETRY_DELAYS_S, None):
            try:
                self._stub.ReportScoringResult(request, timeout=REPORT_TIMEOUT_S)
            except grpc.RpcError as error:
                if error.code() in RETRIED_CODES and delay is not None:
                    time.sleep(delay)
                    continue
                self._not_accepted(run, error)
                return
            self._reported.add(run.scoring_run_id)
            return

    def _not_accepted(self, run: ScoreRun, error: grpc.RpcError) -> None:
        LOG.warning("report of trace %s not accepted: %s %s", run.trace_id, error.code().name, error.details())
        # A service that answered has recorded the refusal on the run; one out of reach fails the run itself
        # when the worker exits, so only the former counts as told.
        if error.code() not in RETRIED_CODES:
            self._reported.add(run.scoring_run_id)
