"""Training jobs: from a claimed model to a job directory, a launched worker, and a recorded result.

The dispatcher claims a queued model (only a queued one can be claimed), reads the selected traces
with their latest evaluations through a `TraceSource`, builds the preference pairs, records the
pairs and the feedback report (before the minimum-pair check, so a failed model keeps its report),
writes the job directory of the spec's contract and launches the worker. When the worker ends, its
`result.json` becomes the model's metrics (exactly the shared training metric keys), the checkpoint
archive goes to object storage under `reward-models/<owner_id>/<model_id>.tar.gz`, and the model
succeeds; otherwise it fails with the worker's error. A recovery sweep fails interrupted submissions
and overdue jobs.

The scores the worker computed for the selected traces (`scores.jsonl`, `action_scores.jsonl`) are
read before the directory goes and published through a `ScorePublisher`, at the trace revisions the
dispatcher read (kept in `job.json`, which the worker ignores), only after the model is recorded as
succeeded: a trained checkpoint outweighs its scores, so a scorer out of reach is logged, fails
nothing, and leaves those traces to the scorer's own background scoring.

This is policy, not transport: no gRPC and no `stash.rm.v1` message reaches it
(`stash_trainer.clients` is the edge), which an import-linter contract keeps true.
"""

from __future__ import annotations

import shutil
import tarfile
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from time import monotonic
from typing import Any, Protocol, TypeVar

import orjson
import structlog
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.orm import Session, sessionmaker

from stash_common.coordination import Wakeups
from stash_common.db import transaction, utc_now
from stash_common.errors import InvalidArgument, StashError
from stash_common.job_files import read_jsonl
from stash_common.launcher import Launcher, RunningJob
from stash_common.queue_loop import QueueLoop
from stash_common.rendering import is_rendered, render_example, render_trace
from stash_common.storage import ObjectStore
from stash_common.training_metrics import check_training_metrics
from stash_trainer import store
from stash_trainer.pairs.dataset import PairSet, build_pairs, check_trainable
from stash_trainer.pairs.feedback import FeedbackExtractor
from stash_trainer.pairs.inputs import SourceTrace
from stash_trainer.worker import job as contract

log = structlog.get_logger()
# What a launcher runs for a training job: `python -m stash_trainer.worker <job_dir>`.
WORKER_MODULE = "stash_trainer.worker"
WAKEUP_TOPIC = "trainer.models"
POLL_S = 1.0
# The key of job.json under which the dispatcher keeps the revision of each selected trace it read.
TRACE_REVISIONS = "trace_revisions"
Row = TypeVar("Row", bound=BaseModel)


@dataclass(frozen=True)
class JobSettings:
    """What every training job of this trainer shares."""

    artifact_dir: Path
    max_length: int = 1024
    batch_size: int = 8
    learning_rate: float = 1e-4
    seed: int = 0
    submit_timeout: timedelta = timedelta(minutes=35)
    job_timeout: timedelta = timedelta(minutes=70)
    sweep_interval_s: float = 30.0
    device: str = "auto"  # what the worker trains on: auto (CUDA, then MPS, then CPU), cpu, cuda or mps


@dataclass(frozen=True)
class ActionScore:
    """The raw reward and display credit a training job computed for one action."""

    step_id: str
    score: float
    credit: float


@dataclass(frozen=True)
class TrainingScores:
    """What a succeeded training job computed for one selected trace, at the revision the dispatcher read."""

    trace_id: str
    trace_revision: int
    trace_score: float | None
    action_scores: tuple[ActionScore, ...]


@dataclass(frozen=True)
class PublishedScores:
    """How many traces the scorer published, and how many its validation refused."""

    published: int
    rejected: int


class TraceSource(Protocol):
    """Where the dispatcher reads the selected traces (ingest and the labeler, through `stash_trainer.clients`)."""

    def source_trace(self, owner_id: str, trace_id: str) -> SourceTrace:
        """One selected trace with what supervises it; an unreachable peer raises `Unavailable`."""
        ...


class ScorePublisher(Protocol):
    """Where a succeeded model's training scores go (the scorer, through `stash_trainer.clients`)."""

    def publish_training_scores(
        self, owner_id: str, reward_model_id: str, traces: Sequence[TrainingScores]
    ) -> PublishedScores:
        """Publish the scores; a scorer out of reach raises `Unavailable`, a refusal another `StashError`."""
        ...


def archive_key(owner_id: str, model_id: str) -> str:
    """Where a model's checkpoint archive lives in object storage."""
    return f"reward-models/{owner_id}/{model_id}.tar.gz"


class Dispatcher:
    """Claims queued models, prepares and launches their jobs, and records how they end."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        traces: TraceSource,
        scores: ScorePublisher,
        objects: ObjectStore,
        launcher: Launcher,
        wakeups: Wakeups,
        settings: JobSettings,
        extractor: FeedbackExtractor | None = None,
    ) -> None:
        self.sessions = sessions
        self.traces = traces
        self.scores = scores
        self.objects = objects
        self.launcher = launcher
        self.wakeups = wakeups
        self.settings = settings
        self.extractor = extractor
        self._running: dict[str, tuple[str, RunningJob]] = {}  # model id → (job id, worker)
        self._loop = QueueLoop(
            "training-dispatcher", wakeups, WAKEUP_TOPIC, self.drain, self.sweep, settings.sweep_interval_s
        )
        self._stopping = self._loop.stopping

    def start(self) -> None:
        """Work in the background."""
        self._loop.start()

    def wake(self) -> None:
        """Tell every replica that a model was queued."""
        self._loop.wake()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop claiming, and stop this process's workers: their models fail with a reason to retry."""
        self._loop.stop(timeout_s)
        for model_id, (job_id, running) in list(self._running.items()):
            running.kill()
            self._fail(model_id, job_id, "the trainer stopped while this model was training; retry")

    def sweep(self) -> list[str]:
        """Fail interrupted submissions and overdue jobs."""
        with transaction(self.sessions) as session:
            failed = store.fail_stale(session, self.settings.submit_timeout, self.settings.job_timeout)
        if failed:
            log.warning("reward models failed by the recovery sweep", reward_model_ids=failed)
        return failed

    def drain(self) -> int:
        """Claim and launch queued models until none is left; returns how many were launched."""
        launched = 0
        while not self._stopping.is_set():
            with transaction(self.sessions) as session:
                candidates = store.queued_ids(session, 10)
            if not candidates:
                return launched
            for model_id in candidates:
                with transaction(self.sessions) as session:
                    job_id = store.claim(session, model_id)
                if job_id is not None:
                    launched += self.run_claimed(model_id, job_id) is not None
        return launched

    def run_claimed(self, model_id: str, job_id: str) -> RunningJob | None:
        """Prepare and launch a claimed model's job; the model fails with the reason when that is impossible."""
        try:
            job_dir = self.prepare(model_id, job_id)
            running = self.launcher.launch(job_dir)
        except StashError as error:
            self._fail(model_id, job_id, error.message)
            return None
        with transaction(self.sessions) as session:
            row = store.running_job(session, model_id, job_id)
            row.started_at = utc_now()
            row.progress = {"stage": "training", "job_dir": str(job_dir)}
        self._running[model_id] = (job_id, running)
        threading.Thread(target=self.watch, args=(model_id, job_id, running), daemon=True).start()
        log.info("training job launched", reward_model_id=model_id, job_id=job_id)
        return running

    def prepare(self, model_id: str, job_id: str) -> Path:
        """Build the pairs, record them with the feedback report, and write the job directory."""
        with transaction(self.sessions) as session:
            row = store.running_job(session, model_id, job_id)
            owner_id, trace_ids, config = row.owner_id, list(row.trace_ids), dict(row.training_config or {})
            max_pairs, epochs, base_model = row.max_pairs, row.epochs, row.base_model
        traces = [self.traces.source_trace(owner_id, trace_id) for trace_id in trace_ids]
        pair_set = build_pairs(traces, config or None, max_pairs, self.extractor, self.settings.seed)
        with transaction(self.sessions) as session:
            row = store.running_job(session, model_id, job_id)
            row.feedback = list(pair_set.feedback) if pair_set.feedback is not None else None
            row.num_pairs = len(pair_set.pairs)
            store.save_pairs(session, row, [pair.to_job_line() for pair in pair_set.pairs])
        check_trainable(pair_set.pairs)
        job = {
            "kind": "train",
            "base_model": base_model,
            "epochs": epochs,
            "max_pairs": max_pairs,
            "seed": self.settings.seed,
            "max_length": self.settings.max_length,
            "batch_size": self.settings.batch_size,
            "learning_rate": self.settings.learning_rate,
            "device": self.settings.device,
            TRACE_REVISIONS: {trace.id: trace.revision for trace in traces},
        }
        return write_job_dir(self.settings.artifact_dir / job_id, job, pair_set, traces)

    def watch(self, model_id: str, job_id: str, running: RunningJob) -> None:
        """Record progress until the worker ends, then record its result."""
        deadline = monotonic() + self.settings.job_timeout.total_seconds()
        while (code := running.wait(POLL_S)) is None and monotonic() < deadline and not self._stopping.is_set():
            self._record_progress(model_id, job_id, running.job_dir)
        if code is None:
            if not self._stopping.is_set():
                running.kill()  # overdue: the sweep fails the model
            return
        self._running.pop(model_id, None)
        self._record_progress(model_id, job_id, running.job_dir)
        try:
            self.finish(model_id, job_id, running.job_dir)
        except Exception as error:  # the model must not stay running because recording failed
            log.exception("recording the training result failed", reward_model_id=model_id)
            self._fail(model_id, job_id, f"recording the result failed: {type(error).__name__}: {error}")

    def _record_progress(self, model_id: str, job_id: str, job_dir: Path) -> None:
        path = job_dir / contract.PROGRESS_FILE
        try:
            progress = orjson.loads(path.read_bytes()) if path.is_file() else None
            if progress:
                with transaction(self.sessions) as session:
                    row = store.running_job(session, model_id, job_id)
                    row.progress = {**row.progress, **progress}
        except Exception:  # progress is informative: a failed update must not stop the watch
            log.warning("training progress not recorded", reward_model_id=model_id, exc_info=True)

    def finish(self, model_id: str, job_id: str, job_dir: Path) -> None:
        """Upload the checkpoint, record the metrics, publish the scores; a worker's error or bad metrics fail it."""
        result = orjson.loads((job_dir / contract.RESULT_FILE).read_bytes())
        if "error" in result:
            self._fail(model_id, job_id, str(result["error"]))
            return
        try:
            check_training_metrics(result.get("metrics") or {})
        except InvalidArgument as error:
            self._fail(model_id, job_id, f"the worker's {contract.RESULT_FILE} is unusable: {error.message}")
            return
        with transaction(self.sessions) as session:
            owner_id = store.running_job(session, model_id, job_id).owner_id
        key = archive_key(owner_id, model_id)
        upload_archive(self.objects, key, job_dir / contract.MODEL_DIR)
        scores = self._training_scores(model_id, job_dir)
        with transaction(self.sessions) as session:
            row = store.running_job(session, model_id, job_id)
            row.metrics, row.artifact_key = result["metrics"], key
            row.progress = {**row.progress, "stage": "done"}
            store.finish(row, store.SUCCEEDED)
        shutil.rmtree(job_dir, ignore_errors=True)  # scratch space: the archive is in object storage now
        log.info("reward model trained", reward_model_id=model_id, metrics=result["metrics"])
        self.publish(owner_id, model_id, scores)

    def publish(self, owner_id: str, model_id: str, traces: Sequence[TrainingScores]) -> None:
        """Hand the scorer a succeeded model's training scores; a scorer that cannot take them fails nothing."""
        try:
            published = self.scores.publish_training_scores(owner_id, model_id, traces)
        except StashError as error:
            # The model is trained and recorded; the scorer's background scoring covers these traces instead.
            log.warning("training scores not published", reward_model_id=model_id, error=error.message)
            return
        log.info(
            "training scores published",
            reward_model_id=model_id,
            published_traces=published.published,
            rejected_traces=published.rejected,
        )

    def _training_scores(self, model_id: str, job_dir: Path) -> list[TrainingScores]:
        try:
            return read_training_scores(job_dir)
        except StashError as error:
            # Publishing none still tells the scorer the model is ready, and it scores these traces itself.
            log.warning("the training job's scores are unusable", reward_model_id=model_id, error=error.message)
            return []

    def _fail(self, model_id: str, job_id: str, error: str) -> None:
        with transaction(self.sessions) as session:
            try:
                row = store.running_job(session, model_id, job_id)
            except StashError:
                return  # already settled by a sweep or a newer launch
            row.progress = {**row.progress, "stage": "failed"}
            store.finish(row, store.FAILED, error)
        log.warning("reward model failed", reward_model_id=model_id, error=error)


class _TraceScoreRow(BaseModel):
    """One line of the worker's `scores.jsonl`."""

    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)

    trace_id: str = Field(min_length=1)
    score: float


class _ActionScoreRow(BaseModel):
    """One line of the worker's `action_scores.jsonl`."""

    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)

    trace_id: str = Field(min_length=1)
    step_id: str = Field(min_length=1)
    score: float
    credit: float


def read_training_scores(job_dir: Path) -> list[TrainingScores]:
    """Each selected trace's scores from the worker's files, at the revision `job.json` keeps for it.

    A trace the worker scored nothing of (an empty transcript, no action pairs trained) comes with
    its revision and no scores; a score file the worker did not write is no scores.
    """
    revisions: dict[str, int] = orjson.loads((job_dir / contract.JOB_FILE).read_bytes())[TRACE_REVISIONS]
    trace_scores = {row.trace_id: row.score for row in _rows(job_dir / contract.SCORES_FILE, _TraceScoreRow)}
    actions: dict[str, list[ActionScore]] = {}
    for row in _rows(job_dir / contract.ACTION_SCORES_FILE, _ActionScoreRow):
        actions.setdefault(row.trace_id, []).append(ActionScore(row.step_id, row.score, row.credit))
    return [
        TrainingScores(trace_id, revision, trace_scores.get(trace_id), tuple(actions.get(trace_id, ())))
        for trace_id, revision in revisions.items()
    ]


def _rows(path: Path, record: type[Row]) -> list[Row]:
    return read_jsonl(path, record) if path.is_file() else []


def write_job_dir(job_dir: Path, job: dict[str, Any], pair_set: PairSet, traces: list[SourceTrace]) -> Path:
    """The spec's job directory: job.json, pairs.jsonl and the items to score after training."""
    job_dir.mkdir(parents=True, exist_ok=True)
    (job_dir / contract.JOB_FILE).write_bytes(orjson.dumps(job))
    (job_dir / contract.PAIRS_FILE).write_text(pair_set.to_jsonl(), encoding="utf-8")
    trace_items = [{"trace_id": trace.id, "text": render_trace(trace.steps)} for trace in traces]
    action_items = [
        {"trace_id": trace.id, "step_id": step.id, "text": render_example(trace.steps, step.index)}
        for trace in traces
        for step in trace.steps
        if step.is_action and is_rendered(step)
    ]
    _write_jsonl(job_dir / contract.SCORE_ITEMS_FILE, [item for item in trace_items if item["text"]])
    _write_jsonl(job_dir / contract.ACTION_SCORE_ITEMS_FILE, action_items)
    return job_dir


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))


def upload_archive(objects: ObjectStore, key: str, model_dir: Path) -> None:
    """The checkpoint directory as a tar.gz, stored under `key`."""
    with tempfile.TemporaryDirectory() as scratch:
        archive = Path(scratch) / "model.tar.gz"
        with tarfile.open(archive, "w:gz") as tar:
            tar.add(model_dir, arcname="model")
        objects.put_file(key, archive)
