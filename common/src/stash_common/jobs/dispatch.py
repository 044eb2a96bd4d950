"""JobDispatcher: the loop every job shares (a reward model's training, a GEPA run, a batch of scoring runs).

It claims work (`claim_next`, the batching hook: one queued row by default, `RowDispatcher`; the
scorer's next batch of traces of one checkpoint), lets the service `prepare` the job (its inputs
uploaded under the job's key), launches the worker and watches it until it ends. The hooks below
say what a claim, a failure and an abandoned job mean for the service's tables; the loop around
them (claim, prepare, launch, watch, adopt, lease, sweep) is the same for every kind.

The worker reports its progress and its result to the service over gRPC, which settles the row;
when the worker ends with the row still running, the row fails with how it ended (an exit code, a
Kubernetes Job condition; `job_ended`), and then the job's files are deleted.

Every claimed row is leased (`LEASE_S`): the replica renews the lease every `LEASE_S / 3` seconds
while it prepares the job and watches its worker, which it observes itself (a local process's exit,
a Kubernetes Job's conditions), so a worker that is alive but slow keeps its lease however long an
epoch takes. When a replica dies its leases run out within seconds, and any live replica takes the
row over: it adopts the worker when its launcher can still find it (a Kubernetes Job, whose pod's
failure then fails the row with the Job's condition), and otherwise fails the row with a reason to
retry (a local worker dies with the service that started it). A worker killed under a live replica
ends at once, and its row fails with how it ended.

The recovery sweep adopts workers another replica launched (their launcher can find them by the Job
name the row's progress records), fails interrupted submissions and overdue jobs, and stops the
workers of rows it failed. A service that stops kills the workers it started locally (their rows
fail with a reason to retry); a detached launcher's workers (Kubernetes Jobs) run on, and a sweep
picks them up again.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from time import monotonic
from typing import Any

import structlog
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from stash_common.coordination import Wakeups
from stash_common.db import transaction, utc_now
from stash_common.errors import StashError
from stash_common.jobs import lifecycle
from stash_common.jobs.kinds import worker_kind
from stash_common.jobs.launch import JobEnd, JobLaunch, Launcher, RunningJob
from stash_common.jobs.lifecycle import FAILED, RUNNING, ExpiredLease, JobColumns
from stash_common.jobs.transfer import delete_files, job_key
from stash_common.leases import LeaseKeeper
from stash_common.queue_loop import QueueLoop
from stash_common.storage import ObjectStore

log = structlog.get_logger()
POLL_S = 1.0
LEASE_S = 6.0  # how long a claimed job's lease lasts without renewal; renewed every LEASE_S / 3
JOB_NAME = "job_name"  # the key of a row's progress naming its worker (a Kubernetes Job's name)


@dataclass(frozen=True)
class JobKind:
    """What a dispatcher runs: its service, the worker kind, the noun of its work, and the job's files."""

    service: str  # "trainer": names the job's storage key and the messages
    worker: str  # "train": the launcher's kind (`stash_common.jobs.kinds`: names the Job, picks its worker)
    noun: str  # "reward model", "GEPA run", "scoring job"
    topic: str  # the wake-up topic every replica listens on
    files: Collection[str]  # every input and output file of a job, deleted once it ended


@dataclass(frozen=True)
class RowJobKind(JobKind):
    """A kind whose every job works for one job-backed row (`lifecycle.JobColumns`)."""

    rows: type[JobColumns]
    started: Mapping[str, Any]  # the row's progress once its worker is launched


@dataclass(frozen=True)
class DispatchTiming:
    """How long a job may take to start and to run, and how often the sweep runs."""

    submit_timeout: timedelta
    job_timeout: timedelta
    sweep_interval_s: float
    lease_s: float = LEASE_S

    @property
    def lease(self) -> timedelta:
        """How long a claimed job's lease lasts without renewal."""
        return timedelta(seconds=self.lease_s)


@dataclass(frozen=True)
class Worker:
    """A running job's worker as the tables know it: the launch's name finds it again."""

    row_id: str
    job_id: str
    name: str | None


class JobDispatcher(ABC):
    """Claims work, launches and watches its workers; a subclass says what a claim and an ending mean."""

    def __init__(
        self,
        kind: JobKind,
        sessions: sessionmaker[Session],
        objects: ObjectStore,
        launcher: Launcher,
        wakeups: Wakeups,
        timing: DispatchTiming,
    ) -> None:
        worker_kind(kind.worker)  # a kind stash_common.jobs.kinds does not name fails here, not at its first launch
        self.kind = kind
        self.sessions = sessions
        self.objects = objects
        self.launcher = launcher
        self.timing = timing
        self._running: dict[str, tuple[str, RunningJob]] = {}  # row id → (job id, worker)
        self._lock = threading.Lock()
        self._loop = QueueLoop(
            f"{kind.service}-dispatcher", wakeups, kind.topic, self.drain, self.sweep, timing.sweep_interval_s
        )
        self._stopping = self._loop.stopping
        self.leases = LeaseKeeper(f"{kind.service}-leases", timing.lease_s, self.renew, self.reclaim_expired)

    # --- the hooks: what a claim, a launch and an ending mean for the service's tables ---

    @abstractmethod
    def claim_next(self) -> tuple[str, str] | None:
        """Claim the next work under a new job id, leased: (the id its lease and watcher key on, the job id).

        The id is the job-backed row's, or the job's own for work claimed as a batch; None when nothing is due.
        """

    @abstractmethod
    def prepare(self, row_id: str, job_id: str) -> str | None:
        """Upload the inputs of a claimed job; the job's storage key, or None when it has nothing to run."""

    @abstractmethod
    def running_workers(self) -> Sequence[Worker]:
        """Every running job the tables know of, with its worker's launch name when it was launched."""

    @abstractmethod
    def renew(self, row_ids: list[str]) -> None:
        """Extend the leases of the running jobs this replica holds."""

    @abstractmethod
    def take_expired(self) -> Sequence[ExpiredLease]:
        """Take over the running jobs whose replica stopped renewing their lease (leased again, to this one)."""

    @abstractmethod
    def fail_overdue(self) -> list[str]:
        """Settle interrupted submissions and jobs that overran; their row ids."""

    @abstractmethod
    def abandon(self, row_id: str, job_id: str, reason: str) -> bool:
        """End a job whose worker is gone through no fault of its own; whether this launch still held it."""

    @abstractmethod
    def not_launched(self, row_id: str, job_id: str, error: StashError | OSError) -> None:
        """Settle a claimed job that could not be prepared or launched."""

    @abstractmethod
    def job_ended(self, row_id: str, job_id: str, end: JobEnd) -> None:
        """A worker ended: settle what it left running (its reports settled the rest) before its files go."""

    @abstractmethod
    def record_start(self, row_id: str, job_id: str, name: str) -> None:
        """Record the launch of a claimed job's worker, named `name`."""

    def stopped_reason(self) -> str:
        """Why a job fails when the service that runs its worker locally stops."""
        return f"the {self.kind.service} stopped while this {self.kind.noun} was running; retry"

    def abandoned_reason(self, lease: ExpiredLease) -> str:
        """Why a job whose replica stopped renewing its lease ends: it never started, or its worker is gone."""
        service, noun = self.kind.service, self.kind.noun
        if not lease.started:
            return f"the {service} service that claimed this {noun} stopped before its job started; retry"
        silent = f"its lease was not renewed for {self.timing.lease_s:g} s"
        return f"the {service} service watching this {noun}'s worker stopped ({silent}) and the worker is gone; retry"

    # --- the loop ---

    def start(self) -> None:
        """Work in the background."""
        self._loop.start()
        self.leases.start()

    def wake(self) -> None:
        """Tell every replica that work was queued."""
        self._loop.wake()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop claiming; kill the workers this process runs itself (their jobs are abandoned)."""
        if self.launcher.detached:  # Kubernetes Jobs outlive this replica; a sweep adopts them
            self._loop.stop(timeout_s)
            self.leases.stop()
            return
        # Killed while the loop's thread lives: a local worker's fork server dies with that thread, and a worker
        # left to die with its server could outlive this call by a moment; killed by the server, it is reaped first.
        self._stopping.set()
        self._abandon_workers()
        self._loop.stop(timeout_s)
        self.leases.stop()
        self._abandon_workers()  # one the loop's last pass launched

    def _abandon_workers(self) -> None:
        """Kill the workers this process watches; their jobs fail with a reason to retry."""
        with self._lock:
            running, self._running = list(self._running.items()), {}
        for row_id, (job_id, worker) in running:
            worker.kill()
            self.abandon(row_id, job_id, self.stopped_reason())

    def drain(self) -> int:
        """Claim and launch work until none is due; returns how many jobs were launched."""
        launched = 0
        while not self._stopping.is_set() and (claimed := self.claim_next()) is not None:
            launched += self.run_claimed(*claimed) is not None
        return launched

    def run_claimed(self, row_id: str, job_id: str) -> RunningJob | None:
        """Prepare and launch a claimed job; it is settled with the reason when that is impossible."""
        self.leases.hold(row_id)
        try:
            key = self.prepare(row_id, job_id)
            if key is None:
                self.leases.release(row_id)
                return None
            worker = self.launcher.launch(JobLaunch(self.kind.worker, row_id, job_id, key))
        except (StashError, OSError) as error:
            self.leases.release(row_id)
            self.not_launched(row_id, job_id, error)
            return None
        self.record_start(row_id, job_id, worker.name)
        self._watch(row_id, job_id, worker)
        log.info("job launched", service=self.kind.service, row_id=row_id, job_id=job_id, job_name=worker.name)
        return worker

    def sweep(self) -> list[str]:
        """Adopt other replicas' workers, settle interrupted and overdue jobs, and stop the settled ones' workers."""
        self.adopt_running()
        failed = self.fail_overdue()
        for row_id in failed:
            with self._lock:
                watched = self._running.get(row_id)
            if watched is not None:
                watched[1].kill()  # abandoned: its watcher sees it end and deletes its files
        if failed:
            log.warning("jobs failed by the recovery sweep", service=self.kind.service, row_ids=failed)
        return failed

    def adopt_running(self) -> int:
        """Watch the running jobs' workers this process does not watch yet, when the launcher finds them."""
        adopted = 0
        for known in self.running_workers():
            with self._lock:
                watched = known.row_id in self._running
            if known.name and not watched and (worker := self.launcher.recover(known.name)) is not None:
                self._watch(known.row_id, known.job_id, worker)
                adopted += 1
        return adopted

    def reclaim_expired(self) -> list[str]:
        """Adopt or abandon the running jobs whose replica stopped renewing their lease; the ids abandoned."""
        abandoned = []
        for lease in self.take_expired():
            worker = self.launcher.recover(lease.job_name) if lease.job_name else None
            if worker is not None:
                log.info("job adopted from a stopped replica", service=self.kind.service, row_id=lease.row_id)
                self._watch(lease.row_id, lease.job_id, worker)
            elif self.abandon(lease.row_id, lease.job_id, self.abandoned_reason(lease)):
                abandoned.append(lease.row_id)
        return abandoned

    def _watch(self, row_id: str, job_id: str, worker: RunningJob) -> None:
        self.leases.hold(row_id)
        with self._lock:
            self._running[row_id] = (job_id, worker)
        threading.Thread(target=self.watch, args=(row_id, job_id, worker), daemon=True).start()

    def watch(self, row_id: str, job_id: str, worker: RunningJob) -> None:
        """Wait for the worker to end, then settle what it left running and delete the job's files."""
        deadline = monotonic() + self.timing.job_timeout.total_seconds()
        end = None
        while end is None and monotonic() < deadline and not self._stopping.is_set():
            end = worker.wait(POLL_S)
        if self._stopping.is_set():
            # stop() settles the job (a local worker dies with the dispatcher's thread), or a sweep adopts the worker
            return
        if end is None:
            worker.kill()
            minutes = f"{self.timing.job_timeout.total_seconds() / 60:g} minutes"
            end = JobEnd(False, f"the job did not finish within {minutes}")
        with self._lock:
            self._running.pop(row_id, None)
        self.leases.release(row_id)
        try:
            self.job_ended(row_id, job_id, end)
        except Exception:  # the sweep fails an overdue job later; a watcher must not die silently
            log.exception("recording the end of a job failed", service=self.kind.service, row_id=row_id)
        delete_files(self.objects, job_key(self.kind.service, job_id), self.kind.files)


class RowDispatcher(JobDispatcher):
    """One job per job-backed row (a reward model, a GEPA run): the row's lifecycle is `stash_common.jobs.lifecycle`."""

    kind: RowJobKind

    def __init__(
        self,
        kind: RowJobKind,
        sessions: sessionmaker[Session],
        objects: ObjectStore,
        launcher: Launcher,
        wakeups: Wakeups,
        timing: DispatchTiming,
    ) -> None:
        super().__init__(kind, sessions, objects, launcher, wakeups, timing)

    def claim_next(self) -> tuple[str, str] | None:
        """The oldest queued row this replica wins, moved to running under a new job id."""
        with transaction(self.sessions) as session:
            candidates = lifecycle.queued_ids(session, self.kind.rows, 10)
        for row_id in candidates:
            with transaction(self.sessions) as session:
                job_id = lifecycle.claim(session, self.kind.rows, row_id, self.timing.lease)
            if job_id is not None:
                return row_id, job_id
        return None

    def record_start(self, row_id: str, job_id: str, name: str) -> None:
        """Record the launch; a fast worker may have reported progress, or even settled the row, already."""
        with transaction(self.sessions) as session:
            row = session.get(self.kind.rows, row_id, with_for_update=True)
            if row is None or row.job_id != job_id:
                return
            row.started_at = row.started_at or utc_now()
            if row.status == RUNNING:
                reported = {key: value for key, value in row.progress.items() if key != "stage"}
                row.progress = {**self.kind.started, **reported, JOB_NAME: name}
            else:
                row.progress = {**row.progress, JOB_NAME: name}

    def running_workers(self) -> list[Worker]:
        """The running rows, each with the worker name its progress records."""
        rows = self.kind.rows
        with transaction(self.sessions) as session:
            found = session.execute(select(rows.id, rows.job_id, rows.progress).where(rows.status == RUNNING)).all()
        return [Worker(row_id, job_id, (progress or {}).get(JOB_NAME)) for row_id, job_id, progress in found if job_id]

    def renew(self, row_ids: list[str]) -> None:
        """Extend the leases of the running rows this replica holds."""
        with transaction(self.sessions) as session:
            lifecycle.renew_leases(session, self.kind.rows, row_ids, self.timing.lease)

    def take_expired(self) -> list[ExpiredLease]:
        """The running rows whose lease ran out, leased again to this replica."""
        with transaction(self.sessions) as session:
            return lifecycle.take_expired_leases(
                session, self.kind.rows, self.leases.held(), self.timing.lease, JOB_NAME
            )

    def fail_overdue(self) -> list[str]:
        """Fail interrupted submissions and overdue jobs."""
        with transaction(self.sessions) as session:
            return lifecycle.fail_stale(session, self.kind.rows, self.timing.submit_timeout, self.timing.job_timeout)

    def abandon(self, row_id: str, job_id: str, reason: str) -> bool:
        """Fail the row with a reason to retry."""
        return self.fail(row_id, job_id, reason)

    def not_launched(self, row_id: str, job_id: str, error: StashError | OSError) -> None:
        """Fail the row; a failure a retry would repeat is recorded as not retryable."""
        if isinstance(error, StashError):
            self.fail(row_id, job_id, error.message, retryable=not lifecycle.retry_repeats(error))
        else:
            self.fail(row_id, job_id, f"the job's files could not be stored: {error}")

    def job_ended(self, row_id: str, job_id: str, end: JobEnd) -> None:
        """A worker ended: a row it left running fails with how it ended (its report settles it otherwise)."""
        reason = f"the {self.kind.service} worker ended without reporting a result"
        self.fail(row_id, job_id, f"{reason}: {end.detail}" if end.detail else reason)

    def fail(self, row_id: str, job_id: str, error: str, retryable: bool = True) -> bool:
        """Fail the row if this launch still runs it (`retryable`: whether a retry may succeed); whether it did."""
        with transaction(self.sessions) as session:
            row = session.get(self.kind.rows, row_id, with_for_update=True)
            if row is None or row.status != RUNNING or row.job_id != job_id:
                return False  # already settled by its worker's report, a sweep or a newer launch
            row.progress = {
                **row.progress,
                "stage": "failed",
                **({} if retryable else {lifecycle.RETRYABLE: False}),
            }
            lifecycle.finish(row, FAILED, error)
        log.warning("job failed", service=self.kind.service, row_id=row_id, error=error)
        return True
