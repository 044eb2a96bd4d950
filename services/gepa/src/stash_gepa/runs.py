"""GEPA runs as jobs: from a claimed run to a job directory, a launched worker, and a recorded result.

The dispatcher claims a queued run (only a queued one can be claimed), reads its reward model and
the model's selected traces with their comments and training evidence, builds the examples, splits
them into GEPA's train and validation sets, records the budget warning when `max_metric_calls` is
too small for more than one proposal, writes the job directory of the spec's contract and launches
the worker. While it runs, `progress.json` becomes the run's metric calls used; when it ends, its
`result.json` (validated by the contract) becomes the run's result, or its error the run's error.
A recovery sweep fails interrupted submissions and overdue jobs; a failed run can be retried.

This is policy, not transport: the peers are behind `ModelSource` and `TraceSource`
(`stash_gepa.clients`), and no `stash.rm.v1` message reaches this module.
"""

from __future__ import annotations

import shutil
import threading
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from time import monotonic
from typing import Any, Protocol

import structlog
from sqlalchemy.orm import Session, sessionmaker

from stash_common.coordination import Wakeups
from stash_common.db import transaction, utc_now
from stash_common.errors import FailedPrecondition, InvalidArgument, NotFound, StashError
from stash_common.job_lifecycle import FAILED, SUCCEEDED, finish
from stash_common.launcher import Launcher, RunningJob
from stash_common.queue_loop import QueueLoop
from stash_gepa import job_contract as contract
from stash_gepa import store
from stash_gepa.examples import ExampleTrace, Finding, budget_warning, build_examples, validation_ids

log = structlog.get_logger()
# What a launcher runs for a GEPA job: `python -m stash_gepa.worker <job_dir>`.
WORKER_MODULE = "stash_gepa.worker"
WAKEUP_TOPIC = "gepa.runs"
POLL_S = 1.0


@dataclass(frozen=True)
class JobSettings:
    """What every GEPA job of this service shares."""

    artifact_dir: Path
    reflection_api_base: str | None = None
    reflection_minibatch_size: int = 3
    task_concurrency: int = 8
    max_length: int = 1024
    batch_size: int = 8
    seed: int = 0
    submit_timeout: timedelta = timedelta(minutes=10)
    job_timeout: timedelta = timedelta(minutes=60)
    sweep_interval_s: float = 30.0


@dataclass(frozen=True)
class RewardModelInfo:
    """What a GEPA run needs of its reward model."""

    id: str
    name: str
    status: str  # queued, running, succeeded or failed
    artifact_key: str | None
    trace_ids: tuple[str, ...]
    findings: Mapping[str, tuple[Finding, ...]]  # trace id → the feedback classifier's findings on it


class ModelSource(Protocol):
    """Where the dispatcher reads reward models and their training pairs (the trainer)."""

    def reward_model(self, owner_id: str, model_id: str) -> RewardModelInfo:
        """The owner's reward model; NotFound for another owner's, Unavailable when out of reach."""
        ...

    def training_pairs(self, owner_id: str, model_id: str) -> list[dict[str, Any]]:
        """The model's recorded training pairs with their evidence."""
        ...


class TraceSource(Protocol):
    """Where the dispatcher reads the selected traces (ingest)."""

    def example_trace(
        self, owner_id: str, trace_id: str, findings: Sequence[Finding], pairs: Sequence[Mapping[str, Any]]
    ) -> ExampleTrace:
        """One selected trace with its comments; NotFound once it was deleted."""
        ...


def require_succeeded(model: RewardModelInfo) -> str:
    """The checkpoint key of a succeeded model; FailedPrecondition (409) otherwise."""
    if model.status != SUCCEEDED or model.artifact_key is None:
        raise FailedPrecondition(
            f"reward model {model.id} is {model.status}: GEPA needs a succeeded model as its metric"
        )
    return model.artifact_key


class Dispatcher:
    """Claims queued runs, prepares and launches their jobs, and records how they end."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        models: ModelSource,
        traces: TraceSource,
        launcher: Launcher,
        wakeups: Wakeups,
        settings: JobSettings,
    ) -> None:
        self.sessions = sessions
        self.models = models
        self.traces = traces
        self.launcher = launcher
        self.settings = settings
        self._running: dict[str, tuple[str, RunningJob]] = {}  # run id → (job id, worker)
        self._loop = QueueLoop(
            "gepa-dispatcher", wakeups, WAKEUP_TOPIC, self.drain, self.sweep, settings.sweep_interval_s
        )
        self._stopping = self._loop.stopping

    def start(self) -> None:
        """Work in the background."""
        self._loop.start()

    def wake(self) -> None:
        """Tell every replica that a run was queued."""
        self._loop.wake()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop claiming, and stop this process's workers: their runs fail with a reason to retry."""
        self._loop.stop(timeout_s)
        for run_id, (job_id, running) in list(self._running.items()):
            running.kill()
            self._fail(run_id, job_id, "the gepa service stopped while this run was optimising; retry")

    def sweep(self) -> list[str]:
        """Fail interrupted submissions and overdue jobs."""
        with transaction(self.sessions) as session:
            failed = store.fail_stale(session, self.settings.submit_timeout, self.settings.job_timeout)
        if failed:
            log.warning("GEPA runs failed by the recovery sweep", gepa_run_ids=failed)
        return failed

    def drain(self) -> int:
        """Claim and launch queued runs until none is left; returns how many were launched."""
        launched = 0
        while not self._stopping.is_set():
            with transaction(self.sessions) as session:
                candidates = store.queued_ids(session, 10)
            if not candidates:
                return launched
            for run_id in candidates:
                with transaction(self.sessions) as session:
                    job_id = store.claim(session, run_id)
                if job_id is not None:
                    launched += self.run_claimed(run_id, job_id) is not None
        return launched

    def run_claimed(self, run_id: str, job_id: str) -> RunningJob | None:
        """Prepare and launch a claimed run's job; the run fails with the reason when that is impossible."""
        try:
            job_dir = self.prepare(run_id, job_id)
            running = self.launcher.launch(job_dir)
        except StashError as error:
            self._fail(run_id, job_id, error.message)
            return None
        with transaction(self.sessions) as session:
            row = store.running_job(session, run_id, job_id)
            row.started_at = utc_now()
            row.progress = {"stage": "optimising", "metric_calls_used": 0}
        self._running[run_id] = (job_id, running)
        threading.Thread(target=self.watch, args=(run_id, job_id, running), daemon=True).start()
        log.info("GEPA job launched", gepa_run_id=run_id, job_id=job_id)
        return running

    def prepare(self, run_id: str, job_id: str) -> Path:
        """Read the model and its traces, build and split the examples, and write the job directory."""
        with transaction(self.sessions) as session:
            row = store.running_job(session, run_id, job_id)
            owner_id, model_id = row.owner_id, row.reward_model_id
            task_model, task_api_base = row.task_model, row.task_api_base
            reflection_model, max_metric_calls = row.reflection_model, row.max_metric_calls
        model = self.models.reward_model(owner_id, model_id)
        artifact_key = require_succeeded(model)
        examples = build_examples(self._example_traces(owner_id, model))
        validation = validation_ids(examples, self.settings.seed)
        train_count = len(examples) - len(validation) or len(validation)
        minibatch = min(self.settings.reflection_minibatch_size, train_count)
        warning = budget_warning(max_metric_calls, len(validation), minibatch)
        with transaction(self.sessions) as session:
            row = store.running_job(session, run_id, job_id)
            row.train_examples, row.validation_examples, row.budget_warning = train_count, len(validation), warning
        if warning:
            log.warning("GEPA budget too small", gepa_run_id=run_id, warning=warning)
        job = contract.GepaJob(
            reward_model_key=artifact_key,
            task_model=task_model,
            task_api_base=task_api_base,
            reflection_model=reflection_model,
            max_metric_calls=max_metric_calls,
            job_id=job_id,
            reward_model_id=model_id,
            reflection_api_base=self.settings.reflection_api_base,
            validation_trace_ids=validation,
            reflection_minibatch_size=minibatch,
            seed=self.settings.seed,
            max_length=self.settings.max_length,
            batch_size=self.settings.batch_size,
            task_concurrency=self.settings.task_concurrency,
        )
        job_dir = self.settings.artifact_dir / job_id
        job_dir.mkdir(parents=True, exist_ok=True)
        contract.write_job(job_dir, job)
        contract.write_examples(job_dir, examples)
        return job_dir

    def _example_traces(self, owner_id: str, model: RewardModelInfo) -> list[ExampleTrace]:
        pairs_by_trace: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for pair in self.models.training_pairs(owner_id, model.id):
            for trace_id in pair.get("trace_ids") or ():
                pairs_by_trace[trace_id].append(pair)
        traces = []
        for trace_id in model.trace_ids:
            try:
                found = model.findings.get(trace_id, ())
                traces.append(self.traces.example_trace(owner_id, trace_id, found, pairs_by_trace[trace_id]))
            except NotFound:
                log.info("a selected trace was deleted since training; GEPA goes without it", trace_id=trace_id)
        return traces

    def watch(self, run_id: str, job_id: str, running: RunningJob) -> None:
        """Record progress until the worker ends, then record its result."""
        deadline = monotonic() + self.settings.job_timeout.total_seconds()
        while (code := running.wait(POLL_S)) is None and monotonic() < deadline and not self._stopping.is_set():
            self._record_progress(run_id, job_id, running.job_dir)
        if code is None:
            if not self._stopping.is_set():
                running.kill()  # overdue: the sweep fails the run
            return
        self._running.pop(run_id, None)
        self._record_progress(run_id, job_id, running.job_dir)
        try:
            self.finish(run_id, job_id, running.job_dir)
        except Exception as error:  # the run must not stay running because recording failed
            log.exception("recording the GEPA result failed", gepa_run_id=run_id)
            self._fail(run_id, job_id, f"recording the result failed: {type(error).__name__}: {error}")

    def _record_progress(self, run_id: str, job_id: str, job_dir: Path) -> None:
        try:
            progress = contract.read_progress(job_dir)
            if progress is not None:
                with transaction(self.sessions) as session:
                    row = store.running_job(session, run_id, job_id)
                    row.progress = {**row.progress, "metric_calls_used": progress.metric_calls_used}
        except StashError:  # progress is informative: a failed update must not stop the watch
            log.warning("GEPA progress not recorded", gepa_run_id=run_id, exc_info=True)

    def finish(self, run_id: str, job_id: str, job_dir: Path) -> None:
        """Record the worker's result; its error, a missing or an invalid result fails the run."""
        try:
            result = contract.read_result(job_dir)
        except InvalidArgument as error:
            self._fail(run_id, job_id, f"the worker's {contract.RESULT_FILE} is unusable: {error.message}")
            return
        if result is None:
            self._fail(run_id, job_id, f"the GEPA worker ended without a {contract.RESULT_FILE}; see its worker.log")
            return
        if result.error is not None:
            self._fail(run_id, job_id, result.error)
            return
        with transaction(self.sessions) as session:
            row = store.running_job(session, run_id, job_id)
            row.result = result.model_dump(mode="json", exclude_none=True)
            row.progress = {**row.progress, "stage": "done", "metric_calls_used": result.metric_calls}
            finish(row, SUCCEEDED)
        shutil.rmtree(job_dir, ignore_errors=True)  # scratch space: the result is in the database now
        log.info("GEPA run succeeded", gepa_run_id=run_id, best_score=result.best_score, seed_score=result.seed_score)

    def _fail(self, run_id: str, job_id: str, error: str) -> None:
        with transaction(self.sessions) as session:
            try:
                row = store.running_job(session, run_id, job_id)
            except StashError:
                return  # already settled by a sweep or a newer launch
            row.progress = {**row.progress, "stage": "failed"}
            finish(row, FAILED, error)
        log.warning("GEPA run failed", gepa_run_id=run_id, error=error)
