"""The dispatcher: queued runs become batches, batches become uploaded jobs and workers, workers end.

A batch is up to `batch_traces` queued runs of one checkpoint for one owner (one loaded model per worker),
explicit requests first; the batch served next holds the oldest explicit request, else personal models and
the shared evaluator's current release take turns, owners in turn within each (`store.next_batch`).
At most `max_active_batches` jobs run at once: each holds a slot the database keeps unique, so
replicas share the limit. Claiming moves only queued runs to running under the new job's id, so a
duplicate wake-up or delivery never scores a trace twice. Each trace is read at its run's revision
(a superseded revision fails the run, a deleted trace is forgotten), rendered with the shared renderer
into the job files of the spec's contract, which go to object storage under `jobs/scorer/<job id>/`;
the worker (`python -m stash_common.jobs.worker score --job <key>`) downloads them into its own
scratch space and reports each trace over gRPC as soon as it is done. When the worker ends, the runs it never reported
fail with how it ended (its exit code and the last line of its log, or its Kubernetes Job's condition)
and the job's files are deleted; the sweep adopts jobs another replica launched (the Job name follows
from the job id), retries retryable failures up to `max_attempts` and fails jobs that outlive
`job_timeout`. A scorer that stops, or cannot reach ingest, puts its local jobs' runs back in the queue
instead: that is no fault of theirs (Kubernetes Jobs run on, and a sweep adopts them). Each job is
leased (`stash_common.leases.LeaseKeeper`): its replica renews the lease while it watches the
worker, and when a replica dies any live one takes the job over within seconds, adopting its
Kubernetes Job or, when its worker is gone (a local worker dies with its scorer), putting its runs
back in the queue. The loop around all this is `stash_common.jobs.dispatch.JobDispatcher`; a batch is
its claim. This is policy, not transport: no gRPC reaches it.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import structlog
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from stash_common.coordination import Wakeups
from stash_common.db import transaction, utc_now
from stash_common.errors import FailedPrecondition, NotFound, StashError, Unavailable
from stash_common.jobs.dispatch import LEASE_S, DispatchTiming, JobDispatcher, JobKind, Worker
from stash_common.jobs.launch import JobEnd, JobLaunch, Launcher
from stash_common.jobs.lifecycle import ExpiredLease
from stash_common.jobs.transfer import job_key, upload_files
from stash_common.rendering import render_example, render_trace
from stash_common.storage import ObjectStore
from stash_scorer import store
from stash_scorer.background import BackgroundScoring
from stash_scorer.inputs import ScorerTrace, TraceSource
from stash_scorer.job_contract import (
    INPUT_FILES,
    ActionScoreItem,
    ScoreItem,
    ScoreJob,
    ScoreRun,
    write_action_score_items,
    write_job,
    write_score_items,
)

log = structlog.get_logger()
SERVICE = "scorer"
CLAIM_ATTEMPTS = 3
JOB_KIND = JobKind(service=SERVICE, worker="score", noun="scoring job", topic="scorer.runs", files=INPUT_FILES)


@dataclass(frozen=True)
class JobSettings:
    """How the dispatcher batches runs and what every scoring job of this scorer shares."""

    scorer_address: str
    max_active_batches: int = 2
    batch_traces: int = 8
    max_attempts: int = 3
    max_length: int = 1024
    batch_size: int = 8
    job_timeout: timedelta = timedelta(minutes=30)
    sweep_interval_s: float = 10.0
    lease_s: float = LEASE_S


@dataclass(frozen=True)
class ClaimedRun:
    """A run claimed into a batch."""

    id: str
    trace_id: str
    trace_revision: int
    explicit: bool


@dataclass(frozen=True)
class Batch:
    """A claimed job: one checkpoint and its runs, explicit ones first."""

    job_id: str
    owner_id: str
    reward_model_id: str
    artifact_key: str
    runs: tuple[ClaimedRun, ...]


class Dispatcher(JobDispatcher):
    """Claims batches of queued runs, launches their workers, and records how the workers end."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        traces: TraceSource,
        objects: ObjectStore,
        launcher: Launcher,
        wakeups: Wakeups,
        settings: JobSettings,
        background: BackgroundScoring,
    ) -> None:
        # A scoring job is claimed, not queued: there is no interrupted submission to fail (the submit timeout).
        timing = DispatchTiming(settings.job_timeout, settings.job_timeout, settings.sweep_interval_s, settings.lease_s)
        super().__init__(JOB_KIND, sessions, objects, launcher, wakeups, timing)
        self.traces = traces
        self.settings = settings
        self.background = background

    def sweep(self) -> list[str]:
        """Adopt other replicas' jobs, fail overdue ones, queue retryable failures again, then the background sweep."""
        overdue = super().sweep()
        with transaction(self.sessions) as session:
            retried = store.retry_failed(session, self.settings.max_attempts)
        if retried:
            log.info("scoring sweep", retried_runs=retried)
        self.background.sweep()
        return overdue

    def drain(self) -> int:
        """Queue the newly ready models' traces, then launch batches while slots are free; returns jobs launched."""
        self.background.backfill()
        return super().drain()

    def claim_next(self) -> tuple[str, str] | None:
        """The next batch, as (its job id, its job id): a scoring job is its own row."""
        batch = self.claim()
        return None if batch is None else (batch.job_id, batch.job_id)

    def claim(self) -> Batch | None:
        """A new job holding a free slot and the next queued runs of one checkpoint; None when none is due."""
        for _ in range(CLAIM_ATTEMPTS):
            try:
                with transaction(self.sessions) as session:
                    slot = store.free_slot(session, self.settings.max_active_batches)
                    key = store.next_batch(session) if slot is not None else None
                    if slot is None or key is None:
                        return None
                    runs = store.queued_runs(session, key, self.settings.batch_traces)
                    if not runs:
                        return None
                    job = store.open_job(session, key, slot, [run.id for run in runs], self.timing.lease)
                    if job is not None:
                        self.leases.hold(job.id)
                        return _batch(job, runs[0].artifact_key, store.job_runs(session, job.id))
            except IntegrityError:
                return None  # another replica took the slot: the next wake-up or sweep tries again
        return None

    def prepare(self, row_id: str, job_id: str) -> str | None:
        """Read the batch's traces and upload its job's files; their key, or None when no trace is left to score."""
        batch = self._claimed_batch(job_id)
        scorable = self.read_traces(batch)
        if not scorable:
            self._finish(job_id, 0, "")
            return None
        key = job_key(SERVICE, job_id)
        with tempfile.TemporaryDirectory(prefix="stash-score-job-") as staging:
            write_job_dir(Path(staging), self._job(batch, scorable), [trace for _, trace in scorable])
            upload_files(self.objects, key, Path(staging), INPUT_FILES)
        return key

    def _claimed_batch(self, job_id: str) -> Batch:
        with transaction(self.sessions) as session:
            job = session.get(store.ScoringJobRow, job_id)
            runs = store.job_runs(session, job_id)
            if job is None or not runs:
                return Batch(job_id, "", "", "", ())  # settled meanwhile: nothing to score
            return _batch(job, runs[0].artifact_key, runs)

    def not_launched(self, row_id: str, job_id: str, error: StashError | OSError) -> None:
        """The runs fail with why the worker could not be started; a peer out of reach is no fault of theirs.

        Then (ingest, the Kubernetes API) the runs go back to the queue and the error ends this drain
        until the next pass.
        """
        if isinstance(error, Unavailable):
            self._requeue(job_id, f"the scoring job could not start: {error.message}")
            raise error
        self._finish(job_id, None, f"the scoring worker could not be started: {error}")

    def record_start(self, row_id: str, job_id: str, name: str) -> None:
        """Nothing to record: a scoring job's worker is named after the job (`running_workers`)."""

    def read_traces(self, batch: Batch) -> list[tuple[ClaimedRun, ScorerTrace]]:
        """Each run's trace at its revision; runs that cannot be scored are settled here and left out."""
        scorable = []
        for run in batch.runs:
            try:
                trace = self.traces.trace_revision(batch.owner_id, run.trace_id, run.trace_revision)
            except FailedPrecondition as error:
                self._settle(
                    run,
                    f"trace {run.trace_id} changed before it was scored ({error.message}); "
                    "its new revision is scored next",
                )
                continue
            except NotFound:
                with transaction(self.sessions) as session:
                    store.forget_trace(session, batch.owner_id, run.trace_id)
                continue
            if trace.actions:
                scorable.append((run, trace))
            elif run.explicit:
                self._settle(run, f"trace {run.trace_id} has no assistant response or tool call to score")
            else:
                self._drop(run)  # background work found nothing to score: no run to show for it
        return scorable

    def running_workers(self) -> list[Worker]:
        """Every running job; its worker's name follows from its id."""
        with transaction(self.sessions) as session:
            running = store.running_job_ids(session)
        return [Worker(job_id, job_id, _launch(job_id).name) for job_id in running]

    def renew(self, row_ids: list[str]) -> None:
        """Extend the leases of the jobs this replica watches."""
        with transaction(self.sessions) as session:
            store.renew_job_leases(session, row_ids, self.timing.lease)

    def take_expired(self) -> list[ExpiredLease]:
        """The running jobs whose lease ran out, leased again to this replica."""
        with transaction(self.sessions) as session:
            expired = store.take_expired_jobs(session, self.leases.held(), self.timing.lease)
        return [ExpiredLease(job_id, job_id, _launch(job_id).name, started=True) for job_id in expired]

    def fail_overdue(self) -> list[str]:
        """End the jobs that outlived `job_timeout`: their unreported runs fail."""
        minutes = f"{self.settings.job_timeout.total_seconds() / 60:g} minutes"
        with transaction(self.sessions) as session:
            overdue = store.overdue_jobs(session, utc_now() - self.settings.job_timeout)
        for job_id in overdue:
            self._finish(job_id, None, f"the scoring job did not finish within {minutes}")
        return overdue

    def abandon(self, row_id: str, job_id: str, reason: str) -> bool:
        """A job that could not run through no fault of its traces: its runs go back to the queue."""
        self._requeue(job_id, reason)
        self.wake()
        return True

    def stopped_reason(self) -> str:
        """Why a job ends when its scorer stops (its runs go back to the queue)."""
        return "the scorer stopped while the job was running"

    def abandoned_reason(self, lease: ExpiredLease) -> str:
        """Why a job ends when the scorer watching it stopped (its runs go back to the queue)."""
        return f"the scorer watching the job stopped (no lease renewal for {self.settings.lease_s:g} s)"

    def job_ended(self, row_id: str, job_id: str, end: JobEnd) -> None:
        """The runs the worker never reported fail with how it ended."""
        self._finish(job_id, end.exit_code, unreported_error(end))

    def _job(self, batch: Batch, scorable: Sequence[tuple[ClaimedRun, ScorerTrace]]) -> ScoreJob:
        return ScoreJob(
            job_id=batch.job_id,
            reward_model_id=batch.reward_model_id,
            reward_model_key=batch.artifact_key,
            max_length=self.settings.max_length,
            batch_size=self.settings.batch_size,
            scorer_address=self.settings.scorer_address,
            runs=[
                ScoreRun(
                    scoring_run_id=run.id,
                    owner_id=batch.owner_id,
                    trace_id=run.trace_id,
                    trace_revision=run.trace_revision,
                )
                for run, _ in scorable
            ],
        )

    def _finish(self, job_id: str, exit_code: int | None, unreported: str) -> None:
        with transaction(self.sessions) as session:
            failed = store.finish_job(session, job_id, exit_code, unreported)
        if failed:
            log.warning("scoring runs failed", job_id=job_id, scoring_run_ids=failed, error=unreported)

    def _requeue(self, job_id: str, reason: str) -> None:
        """End a job that could not run through no fault of its traces: its runs go back to the queue."""
        with transaction(self.sessions) as session:
            store.requeue(session, [row.id for row in store.job_runs(session, job_id)])
        self._finish(job_id, None, reason)

    def _settle(self, run: ClaimedRun, error: str) -> None:
        with transaction(self.sessions) as session:
            row = session.get(store.ScoringRunRow, run.id)
            if row is not None and row.status == store.RUNNING:
                store.finish_run(row, store.FAILED, error, permanent=True)

    def _drop(self, run: ClaimedRun) -> None:
        with transaction(self.sessions) as session:
            row = session.get(store.ScoringRunRow, run.id)
            if row is not None:
                session.delete(row)


def _batch(job: store.ScoringJobRow, artifact_key: str, runs: Sequence[store.ScoringRunRow]) -> Batch:
    claimed = tuple(ClaimedRun(run.id, run.trace_id, run.trace_revision, run.explicit) for run in runs)
    return Batch(job.id, job.owner_id, job.reward_model_id, artifact_key, claimed)


def write_job_dir(job_dir: Path, job: ScoreJob, traces: Sequence[ScorerTrace]) -> Path:
    """The score job directory of the spec's contract: job.json and the rendered actions and traces."""
    job_dir.mkdir(parents=True, exist_ok=True)
    write_job(job_dir, job)
    write_action_score_items(
        job_dir,
        (
            # Marked sections: a checkpoint with input version 3's window reads them, any other drops the marks.
            ActionScoreItem(
                trace_id=trace.id, step_id=step.id, text=render_example(trace.steps, step.index, sections=True)
            )
            for trace in traces
            for step in trace.actions
        ),
    )
    rendered = ((trace.id, render_trace(trace.steps)) for trace in traces)
    write_score_items(job_dir, (ScoreItem(trace_id=trace_id, text=text) for trace_id, text in rendered if text))
    return job_dir


def unreported_error(end: JobEnd) -> str:
    """Why a run the worker never reported failed: how the worker ended (its exit code and last log line)."""
    reason = "the scoring worker ended before reporting this trace"
    return f"{reason}: {end.detail}" if end.detail else reason


def _launch(job_id: str) -> JobLaunch:
    """The launch of scoring job `job_id` (a scoring job is its own row, so its Job name follows from its id)."""
    return JobLaunch(JOB_KIND.worker, job_id, job_id, job_key(SERVICE, job_id))
