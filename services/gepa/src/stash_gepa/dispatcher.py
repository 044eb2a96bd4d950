"""GEPA runs as jobs: from a claimed run to uploaded job inputs, a launched worker, and a recorded result.

The dispatcher (`stash_common.jobs.dispatch.RowDispatcher`) claims a queued run; `prepare` reads its
reward model and the model's selected traces with their comments and training evidence, builds the
examples, splits them into GEPA's train and validation sets, records the budget warning when
`max_metric_calls` is too small for more than one proposal, and uploads the job's files of the
spec's contract to object storage under `jobs/gepa/<job_id>/`. The worker downloads them into its
own scratch space and reports to `GepaService`: the metric calls used while it runs
(`ReportGepaProgress`), and that it ended (`CompleteGepaJob`, which names only the job: the service
reads the `result.json` the worker stored under the job's key and validates it by the contract: the
run's result, or its error the run's error); a worker that ends without reporting
fails the run with how it ended. A recovery sweep fails interrupted submissions and overdue jobs;
a failed run can be retried.

This is policy, not transport: the peers are behind `ModelSource` and `TraceSource`
(`stash_gepa.clients`), and no `stash.rm.v1` message reaches this module.
"""

from __future__ import annotations

import tempfile
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol

import structlog
from pydantic import ValidationError
from sqlalchemy.orm import Session, sessionmaker

from stash_common.coordination import Wakeups
from stash_common.db import transaction
from stash_common.errors import FailedPrecondition, InvalidArgument, NotFound
from stash_common.jobs.dispatch import LEASE_S, DispatchTiming, RowDispatcher, RowJobKind
from stash_common.jobs.files import describe
from stash_common.jobs.launch import Launcher
from stash_common.jobs.lifecycle import FAILED, SUCCEEDED, finish
from stash_common.jobs.transfer import job_key, upload_files
from stash_common.storage import ObjectStore
from stash_gepa import job_contract as contract
from stash_gepa import store
from stash_gepa.examples import ExampleTrace, Finding, budget_warning, build_examples, validation_ids

log = structlog.get_logger()
SERVICE = "gepa"
JOB_KIND = RowJobKind(
    service=SERVICE,
    worker="gepa",
    noun="GEPA run",
    rows=store.GepaRunRow,
    topic="gepa.runs",
    files=(*contract.INPUT_FILES, *contract.OUTPUT_FILES),
    started={"stage": "optimising", "metric_calls_used": 0},
)


@dataclass(frozen=True)
class JobSettings:
    """What every GEPA job of this service shares."""

    report_address: str  # where workers reach this service's gRPC server
    reflection_api_base: str | None = None
    reflection_minibatch_size: int = 3
    task_concurrency: int = 8
    max_length: int = 1024
    batch_size: int = 8
    seed: int = 0
    submit_timeout: timedelta = timedelta(minutes=10)
    job_timeout: timedelta = timedelta(minutes=60)
    sweep_interval_s: float = 30.0
    lease_s: float = LEASE_S  # a claimed job's lease: a replica that died is noticed this long after


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


class Dispatcher(RowDispatcher):
    """Claims queued runs, uploads their jobs' inputs and launches their workers; records what the workers report."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        models: ModelSource,
        traces: TraceSource,
        objects: ObjectStore,
        launcher: Launcher,
        wakeups: Wakeups,
        settings: JobSettings,
    ) -> None:
        timing = DispatchTiming(
            settings.submit_timeout, settings.job_timeout, settings.sweep_interval_s, settings.lease_s
        )
        super().__init__(JOB_KIND, sessions, objects, launcher, wakeups, timing)
        self.models = models
        self.traces = traces
        self.settings = settings

    def prepare(self, row_id: str, job_id: str) -> str:
        """Read the model and its traces, build and split the examples, and upload the job's files; their key."""
        with transaction(self.sessions) as session:
            row = store.running_job(session, row_id, job_id)
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
            row = store.running_job(session, row_id, job_id)
            row.train_examples, row.validation_examples, row.budget_warning = train_count, len(validation), warning
        if warning:
            log.warning("GEPA budget too small", gepa_run_id=row_id, warning=warning)
        job = contract.GepaJob(
            reward_model_key=artifact_key,
            task_model=task_model,
            task_api_base=task_api_base,
            reflection_model=reflection_model,
            max_metric_calls=max_metric_calls,
            job_id=job_id,
            reward_model_id=model_id,
            owner_id=owner_id,
            gepa_run_id=row_id,
            report_address=self.settings.report_address,
            reflection_api_base=self.settings.reflection_api_base,
            validation_trace_ids=validation,
            reflection_minibatch_size=minibatch,
            seed=self.settings.seed,
            max_length=self.settings.max_length,
            batch_size=self.settings.batch_size,
            task_concurrency=self.settings.task_concurrency,
        )
        key = job_key(SERVICE, job_id)
        with tempfile.TemporaryDirectory(prefix="stash-gepa-job-") as staging:
            contract.write_job(Path(staging), job)
            contract.write_examples(Path(staging), examples)
            upload_files(self.objects, key, Path(staging), contract.INPUT_FILES)
        return key

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


def record_progress(session: Session, owner_id: str, run_id: str, job_id: str, metric_calls_used: int) -> None:
    """Merge a worker's metric calls used into its running run; a superseded launch or another owner is refused."""
    row = _reported_run(session, owner_id, run_id, job_id)
    row.progress = {**row.progress, "metric_calls_used": metric_calls_used}


def record_result(session: Session, objects: ObjectStore, owner_id: str, run_id: str, job_id: str) -> store.GepaRunRow:
    """Settle a running run with the `result.json` its worker stored: the result, or its error; an invalid one fails it.

    A repeated report of the launch that settled the run changes nothing.
    """
    found = store.find_run(session, owner_id, run_id)  # another owner's run is not found, before its state is told
    row = store.completing_job(session, run_id, job_id)
    if row is None:
        return found
    written = stored_result(objects, job_id)
    try:
        result = contract.GepaResult.model_validate_json(written)
    except ValidationError as error:
        row.progress = {**row.progress, "stage": "failed"}
        finish(row, FAILED, f"the worker's {contract.RESULT_FILE} is unusable: {describe(error)}")
        return row
    if result.error is not None:
        row.progress = {**row.progress, "stage": "failed"}
        finish(row, FAILED, result.error)
        return row
    row.result = result.model_dump(mode="json", exclude_none=True)
    row.progress = {**row.progress, "stage": "done", "metric_calls_used": result.metric_calls}
    finish(row, SUCCEEDED)
    log.info("GEPA run succeeded", gepa_run_id=run_id, best_score=result.best_score, seed_score=result.seed_score)
    return row


def stored_result(objects: ObjectStore, job_id: str) -> bytes:
    """The `result.json` the worker of job `job_id` stored; InvalidArgument when it stored none."""
    key = f"{job_key(SERVICE, job_id)}/{contract.RESULT_FILE}"
    try:
        return objects.get(key)
    except NotFound:
        raise InvalidArgument("result", f"no {contract.RESULT_FILE} is stored at {key}: upload it first") from None


def _reported_run(session: Session, owner_id: str, run_id: str, job_id: str) -> store.GepaRunRow:
    store.find_run(session, owner_id, run_id)  # another owner's run is not found, before its state is told
    return store.running_job(session, run_id, job_id)
