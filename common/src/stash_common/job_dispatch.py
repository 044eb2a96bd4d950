"""JobDispatcher: the loop a job-backed row shares (a reward model's training, a GEPA run).

It claims a queued row (only a queued one can be claimed, so a duplicate delivery cannot start it
twice), lets the service `prepare` the job (its inputs uploaded under the job's key), launches the
worker and watches it until it ends. The worker reports its progress and its result to the service
over gRPC, which settles the row; when the worker ends with the row still running, the row fails
with how it ended (an exit code, a Kubernetes Job condition) and the job's files are deleted.

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
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import timedelta
from time import monotonic
from typing import Any

import structlog
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from stash_common import job_lifecycle
from stash_common.coordination import Wakeups
from stash_common.db import transaction, utc_now
from stash_common.errors import StashError
from stash_common.job_lifecycle import FAILED, RUNNING, JobColumns
from stash_common.job_transfer import delete_files, job_key
from stash_common.launcher import JobEnd, JobLaunch, Launcher, RunningJob
from stash_common.leases import LeaseKeeper
from stash_common.queue_loop import QueueLoop
from stash_common.storage import ObjectStore

log = structlog.get_logger()
POLL_S = 1.0
LEASE_S = 6.0  # how long a claimed job's lease lasts without renewal; renewed every LEASE_S / 3
JOB_NAME = "job_name"  # the key of a row's progress naming its worker (a Kubernetes Job's name)


@dataclass(frozen=True)
class JobKind:
    """What a dispatcher runs: its service, the worker kind, the row's noun, and the job's files."""

    service: str  # "trainer": names the job's storage key and the messages
    worker: str  # "train": the launcher's kind (names the Job, picks its resources)
    noun: str  # "reward model", "GEPA run"
    rows: type[JobColumns]
    topic: str  # the wake-up topic every replica listens on
    files: Collection[str]  # every input and output file of a job, deleted once it ended
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


class JobDispatcher(ABC):
    """Claims queued rows, launches and watches their workers; a subclass prepares each job."""

    def __init__(
        self,
        kind: JobKind,
        sessions: sessionmaker[Session],
        objects: ObjectStore,
        launcher: Launcher,
        wakeups: Wakeups,
        timing: DispatchTiming,
    ) -> None:
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
        self.leases = LeaseKeeper(f"{kind.service}-leases", timing.lease_s, self._renew, self.reclaim_expired)

    @abstractmethod
    def prepare(self, row_id: str, job_id: str) -> str:
        """Upload the inputs of a claimed row's job; the job's storage key (the subclass's policy)."""

    def start(self) -> None:
        """Work in the background."""
        self._loop.start()
        self.leases.start()

    def wake(self) -> None:
        """Tell every replica that a row was queued."""
        self._loop.wake()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop claiming; kill the workers this process runs itself (their rows fail with a reason to retry)."""
        self._loop.stop(timeout_s)
        self.leases.stop()
        if self.launcher.detached:
            return  # Kubernetes Jobs outlive this replica; a sweep adopts them
        with self._lock:
            running = list(self._running.items())
        for row_id, (job_id, worker) in running:
            worker.kill()
            self.fail(row_id, job_id, f"the {self.kind.service} stopped while this {self.kind.noun} was running; retry")

    def drain(self) -> int:
        """Claim and launch queued rows until none is left; returns how many were launched."""
        launched = 0
        while not self._stopping.is_set():
            with transaction(self.sessions) as session:
                candidates = job_lifecycle.queued_ids(session, self.kind.rows, 10)
            if not candidates:
                return launched
            for row_id in candidates:
                with transaction(self.sessions) as session:
                    job_id = job_lifecycle.claim(session, self.kind.rows, row_id, self.timing.lease)
                if job_id is not None:
                    launched += self.run_claimed(row_id, job_id) is not None
        return launched

    def run_claimed(self, row_id: str, job_id: str) -> RunningJob | None:
        """Prepare and launch a claimed row's job; the row fails with the reason when that is impossible."""
        self.leases.hold(row_id)
        try:
            key = self.prepare(row_id, job_id)
            worker = self.launcher.launch(JobLaunch(self.kind.worker, row_id, job_id, key))
        except StashError as error:
            self.leases.release(row_id)
            self.fail(row_id, job_id, error.message)
            return None
        self._record_start(row_id, job_id, worker.name)
        self._watch(row_id, job_id, worker)
        log.info("job launched", service=self.kind.service, row_id=row_id, job_id=job_id, job_name=worker.name)
        return worker

    def _record_start(self, row_id: str, job_id: str, name: str) -> None:
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

    def sweep(self) -> list[str]:
        """Adopt other replicas' workers, fail interrupted and overdue jobs, and stop the failed ones' workers."""
        self.adopt_running()
        with transaction(self.sessions) as session:
            failed = job_lifecycle.fail_stale(
                session, self.kind.rows, self.timing.submit_timeout, self.timing.job_timeout
            )
        for row_id in failed:
            with self._lock:
                watched = self._running.get(row_id)
            if watched is not None:
                watched[1].kill()  # abandoned: its watcher sees it end and deletes its files
        if failed:
            log.warning("rows failed by the recovery sweep", service=self.kind.service, row_ids=failed)
        return failed

    def adopt_running(self) -> int:
        """Watch the running rows' workers this process does not watch yet, when the launcher finds them."""
        with transaction(self.sessions) as session:
            rows = session.execute(
                select(self.kind.rows.id, self.kind.rows.job_id, self.kind.rows.progress).where(
                    self.kind.rows.status == RUNNING
                )
            ).all()
        adopted = 0
        for row_id, job_id, progress in rows:
            name = (progress or {}).get(JOB_NAME)
            with self._lock:
                watched = row_id in self._running
            if name and job_id and not watched and (worker := self.launcher.recover(name)) is not None:
                self._watch(row_id, job_id, worker)
                adopted += 1
        return adopted

    def reclaim_expired(self) -> list[str]:
        """Adopt or fail the running rows whose replica stopped renewing their lease; the ids it failed."""
        with transaction(self.sessions) as session:
            expired = job_lifecycle.take_expired_leases(
                session, self.kind.rows, self.leases.held(), self.timing.lease, JOB_NAME
            )
        failed = []
        for lease in expired:
            worker = self.launcher.recover(lease.job_name) if lease.job_name else None
            if worker is not None:
                log.info("job adopted from a stopped replica", service=self.kind.service, row_id=lease.row_id)
                self._watch(lease.row_id, lease.job_id, worker)
            elif self.fail(lease.row_id, lease.job_id, self._abandoned_reason(lease)):
                failed.append(lease.row_id)
        return failed

    def _abandoned_reason(self, lease: job_lifecycle.ExpiredLease) -> str:
        """Why a row whose replica stopped renewing its lease fails: it never started, or its worker is gone."""
        service, noun = self.kind.service, self.kind.noun
        if not lease.started:
            return f"the {service} service that claimed this {noun} stopped before its job started; retry"
        silent = f"its lease was not renewed for {self.timing.lease_s:g} s"
        return f"the {service} service watching this {noun}'s worker stopped ({silent}) and the worker is gone; retry"

    def _renew(self, row_ids: list[str]) -> None:
        with transaction(self.sessions) as session:
            job_lifecycle.renew_leases(session, self.kind.rows, row_ids, self.timing.lease)

    def _watch(self, row_id: str, job_id: str, worker: RunningJob) -> None:
        self.leases.hold(row_id)
        with self._lock:
            self._running[row_id] = (job_id, worker)
        threading.Thread(target=self.watch, args=(row_id, job_id, worker), daemon=True).start()

    def watch(self, row_id: str, job_id: str, worker: RunningJob) -> None:
        """Wait for the worker to end, then settle the row if its worker left it running and delete the job's files."""
        deadline = monotonic() + self.timing.job_timeout.total_seconds()
        end = None
        while end is None and monotonic() < deadline and not self._stopping.is_set():
            end = worker.wait(POLL_S)
        if self._stopping.is_set():
            # stop() settles the row (a local worker dies with the dispatcher's thread), or a sweep adopts the worker
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
        except Exception:  # the sweep fails an overdue row later; a watcher must not die silently
            log.exception("recording the end of a job failed", service=self.kind.service, row_id=row_id)
        delete_files(self.objects, job_key(self.kind.service, job_id), self.kind.files)

    def job_ended(self, row_id: str, job_id: str, end: JobEnd) -> None:
        """A worker ended: a row it left running fails with how it ended (its report settles it otherwise)."""
        reason = f"the {self.kind.service} worker ended without reporting a result"
        self.fail(row_id, job_id, f"{reason}: {end.detail}" if end.detail else reason)

    def fail(self, row_id: str, job_id: str, error: str) -> bool:
        """Fail the row if this launch still runs it; whether it did."""
        with transaction(self.sessions) as session:
            row = session.get(self.kind.rows, row_id, with_for_update=True)
            if row is None or row.status != RUNNING or row.job_id != job_id:
                return False  # already settled by its worker's report, a sweep or a newer launch
            row.progress = {**row.progress, "stage": "failed"}
            job_lifecycle.finish(row, FAILED, error)
        log.warning("job failed", service=self.kind.service, row_id=row_id, error=error)
        return True
