"""The dispatcher: queued runs become batches, batches become uploaded jobs and workers, workers end.

A batch is up to `batch_traces` queued runs of one checkpoint (one loaded model per worker), explicit
requests first; the checkpoint served next is the one with the oldest explicit request, else the oldest
run. At most `max_active_batches` jobs run at once: each holds a slot the database keeps unique, so
replicas share the limit. Claiming moves only queued runs to running under the new job's id, so a
duplicate wake-up or delivery never scores a trace twice. Each trace is read at its run's revision
(a superseded revision fails the run, a deleted trace is forgotten), rendered with the shared renderer
into the job files of the spec's contract, which go to object storage under `jobs/scorer/<job id>/`;
the worker (`python -m stash_scorer.worker --job <key>`) downloads them into its own scratch space and
reports each trace over gRPC as soon as it is done. When the worker ends, the runs it never reported
fail with how it ended (its exit code and the last line of its log, or its Kubernetes Job's condition)
and the job's files are deleted; the sweep adopts jobs another replica launched (the Job name follows
from the job id), retries retryable failures up to `max_attempts` and fails jobs that outlive
`job_timeout`. A scorer that stops, or cannot reach ingest, puts its local jobs' runs back in the queue
instead: that is no fault of theirs (Kubernetes Jobs run on, and a sweep adopts them). Each job is
leased (`stash_common.leases.LeaseKeeper`): its replica renews the lease while it watches the
worker, and when a replica dies any live one takes the job over within seconds, adopting its
Kubernetes Job or, when its worker is gone (a local worker dies with its scorer), putting its runs
back in the queue. This is policy, not transport: no gRPC reaches it.
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from time import monotonic

import structlog
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from stash_common.coordination import Wakeups
from stash_common.db import transaction, utc_now
from stash_common.errors import FailedPrecondition, NotFound, StashError, Unavailable
from stash_common.job_dispatch import LEASE_S
from stash_common.job_transfer import delete_files, job_key, upload_files
from stash_common.launcher import JobEnd, JobLaunch, Launcher, RunningJob
from stash_common.leases import LeaseKeeper
from stash_common.queue_loop import QueueLoop
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
# What a launcher runs for a scoring job: `python -m stash_scorer.worker --job <job key>`.
WORKER_MODULE = "stash_scorer.worker"
WAKEUP_TOPIC = "scorer.runs"
POLL_S = 0.5
CLAIM_ATTEMPTS = 3


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


class Dispatcher:
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
        self.sessions = sessions
        self.traces = traces
        self.objects = objects
        self.launcher = launcher
        self.settings = settings
        self.background = background
        self._running: dict[str, RunningJob] = {}  # job id → worker
        self._lock = threading.Lock()
        self._loop = QueueLoop(
            "scoring-dispatcher", wakeups, WAKEUP_TOPIC, self.drain, self.sweep, settings.sweep_interval_s
        )
        self._stopping = self._loop.stopping
        self.leases = LeaseKeeper("scoring-leases", settings.lease_s, self._renew, self.reclaim_expired)

    def start(self) -> None:
        """Work in the background."""
        self._loop.start()
        self.leases.start()

    def wake(self) -> None:
        """Tell every replica that a run was queued."""
        self._loop.wake()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop claiming and stop this process's local workers; their unreported runs go back to the queue."""
        self._loop.stop(timeout_s)
        self.leases.stop()
        if self.launcher.detached:
            return  # Kubernetes Jobs outlive this replica; a sweep adopts them
        with self._lock:
            running = list(self._running.items())
        for job_id, worker in running:
            worker.kill()
            self._requeue(job_id, "the scorer stopped while the job was running")

    def sweep(self) -> None:
        """Adopt other replicas' jobs, fail overdue ones, queue retryable failures again, then the background sweep."""
        self.adopt_running()
        minutes = f"{self.settings.job_timeout.total_seconds() / 60:g} minutes"
        with transaction(self.sessions) as session:
            overdue = store.overdue_jobs(session, utc_now() - self.settings.job_timeout)
        for job_id in overdue:
            with self._lock:
                running = self._running.pop(job_id, None)
            if running is not None:
                running.kill()
            self._finish(job_id, None, f"the scoring job did not finish within {minutes}")
        with transaction(self.sessions) as session:
            retried = store.retry_failed(session, self.settings.max_attempts)
        if overdue or retried:
            log.info("scoring sweep", overdue_jobs=len(overdue), retried_runs=retried)
        self.background.sweep()

    def drain(self) -> int:
        """Queue the newly ready models' traces, then launch batches while slots are free; returns jobs launched."""
        self.background.backfill()
        launched = 0
        while not self._stopping.is_set() and (batch := self.claim()) is not None:
            launched += self.launch(batch) is not None
        return launched

    def claim(self) -> Batch | None:
        """A new job holding a free slot and the next queued runs of one checkpoint; None when none is due."""
        for _ in range(CLAIM_ATTEMPTS):
            try:
                with transaction(self.sessions) as session:
                    slot = store.free_slot(session, self.settings.max_active_batches)
                    model_id = store.next_model(session) if slot is not None else None
                    if slot is None or model_id is None:
                        return None
                    runs = store.queued_runs(session, model_id, self.settings.batch_traces)
                    if not runs:
                        return None
                    run_ids = [run.id for run in runs]
                    lease = timedelta(seconds=self.settings.lease_s)
                    job = store.open_job(session, runs[0].owner_id, model_id, slot, run_ids, lease)
                    if job is not None:
                        self.leases.hold(job.id)
                        return _batch(job, runs[0].artifact_key, store.job_runs(session, job.id))
            except IntegrityError:
                return None  # another replica took the slot: the next wake-up or sweep tries again
        return None

    def launch(self, batch: Batch) -> RunningJob | None:
        """Read the batch's traces, write its job directory and start its worker; None when nothing was launched.

        Ingest out of reach puts the runs back in the queue and raises, ending this drain until the next pass.
        """
        try:
            scorable = self.read_traces(batch)
        except Unavailable as error:
            self._requeue(batch.job_id, f"could not read the traces: {error.message}")
            raise
        if not scorable:
            self._finish(batch.job_id, 0, "")
            return None
        key = job_key(SERVICE, batch.job_id)
        try:
            with tempfile.TemporaryDirectory(prefix="stash-score-job-") as staging:
                write_job_dir(Path(staging), self._job(batch, scorable), [trace for _, trace in scorable])
                upload_files(self.objects, key, Path(staging), INPUT_FILES)
            running = self.launcher.launch(_launch(batch.job_id))
        except (OSError, StashError) as error:
            self._finish(batch.job_id, None, f"the scoring worker could not be started: {error}")
            return None
        self._watch(batch.job_id, running)
        log.info(
            "scoring job launched", job_id=batch.job_id, reward_model_id=batch.reward_model_id, traces=len(scorable)
        )
        return running

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

    def adopt_running(self) -> int:
        """Watch the running jobs this process does not watch yet, when the launcher finds their workers."""
        with transaction(self.sessions) as session:
            running = store.running_job_ids(session)
        adopted = 0
        for job_id in running:
            with self._lock:
                watched = job_id in self._running
            if not watched and (worker := self.launcher.recover(_launch(job_id).name)) is not None:
                self._watch(job_id, worker)
                adopted += 1
        return adopted

    def reclaim_expired(self) -> int:
        """Adopt or requeue the running jobs whose replica stopped renewing their lease; how many were requeued."""
        lease = timedelta(seconds=self.settings.lease_s)
        reason = f"the scorer watching the job stopped (no lease renewal for {self.settings.lease_s:g} s)"
        with transaction(self.sessions) as session:
            expired = store.take_expired_jobs(session, self.leases.held(), lease)
        requeued = 0
        for job_id in expired:
            if (worker := self.launcher.recover(_launch(job_id).name)) is not None:
                log.info("scoring job adopted from a stopped replica", job_id=job_id)
                self._watch(job_id, worker)
                continue
            self._requeue(job_id, reason)
            requeued += 1
        if requeued:
            self.wake()
        return requeued

    def _renew(self, job_ids: list[str]) -> None:
        with transaction(self.sessions) as session:
            store.renew_job_leases(session, job_ids, timedelta(seconds=self.settings.lease_s))

    def _watch(self, job_id: str, running: RunningJob) -> None:
        self.leases.hold(job_id)
        with self._lock:
            self._running[job_id] = running
        threading.Thread(target=self.watch, args=(job_id, running), daemon=True).start()

    def watch(self, job_id: str, running: RunningJob) -> None:
        """Wait for the worker to end, then fail the runs it never reported and delete the job's files."""
        deadline = monotonic() + self.settings.job_timeout.total_seconds()
        end = None
        while end is None and monotonic() < deadline and not self._stopping.is_set():
            end = running.wait(POLL_S)
        if end is None or self._stopping.is_set():
            return  # overdue (the sweep fails it) or stopping (stop() does, with its own reason)
        with self._lock:
            self._running.pop(job_id, None)
        self._finish(job_id, end.exit_code, unreported_error(end))
        delete_files(self.objects, job_key(SERVICE, job_id), INPUT_FILES)

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
        self.leases.release(job_id)
        try:
            with transaction(self.sessions) as session:
                failed = store.finish_job(session, job_id, exit_code, unreported)
        except Exception:  # the sweep fails an overdue job later; a watcher must not die silently
            log.exception("recording the end of a scoring job failed", job_id=job_id)
            return
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
            ActionScoreItem(trace_id=trace.id, step_id=step.id, text=render_example(trace.steps, step.index))
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
    """The launch of scoring job `job_id` (a scoring job is its own run, so its Job name follows from its id)."""
    return JobLaunch("score", job_id, job_id, job_key(SERVICE, job_id))
