"""Training jobs: from a claimed model to uploaded job inputs, a launched worker, and a recorded result.

The dispatcher (`stash_common.job_dispatch.JobDispatcher`) claims a queued model; `prepare` reads the
selected traces with their latest evaluations through a `TraceSource`, builds the preference pairs,
records the pairs and the feedback report (before the minimum-pair check, so a failed model keeps its
report), and uploads the job's files of the spec's contract to object storage under
`jobs/trainer/<job_id>/`. The worker downloads them into its own scratch space, uploads the checkpoint
archive to `reward-models/<owner_id>/<model_id>.tar.gz` and its score files beside the inputs, and
reports progress and its result to `TrainerService` (`ReportJobProgress`, `CompleteJob`); a worker that
ends without reporting fails the model with how it ended. A recovery sweep fails interrupted
submissions and overdue jobs.

Once `CompleteJob` recorded a success, `publish_job_scores` reads the worker's score files
(`scores.jsonl`, `action_scores.jsonl`) from object storage and publishes them through a
`ScorePublisher`, at the trace revisions the dispatcher read (kept in `job.json`, which the worker
ignores): a trained checkpoint outweighs its scores, so a scorer out of reach is logged, fails
nothing, and leaves those traces to the scorer's own background scoring.

This is policy, not transport: no gRPC and no `stash.rm.v1` message reaches it
(`stash_trainer.clients` is the edge), which an import-linter contract keeps true.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol, TypeVar

import orjson
import structlog
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.orm import Session, sessionmaker

from stash_common.coordination import Wakeups
from stash_common.db import transaction
from stash_common.errors import StashError
from stash_common.job_dispatch import LEASE_S, DispatchTiming, JobDispatcher, JobKind
from stash_common.job_files import read_jsonl
from stash_common.job_transfer import download_files, job_key, upload_files
from stash_common.launcher import Launcher
from stash_common.rendering import is_rendered, render_example, render_trace
from stash_common.storage import ObjectStore
from stash_trainer import store
from stash_trainer.pairs.dataset import PairSet, build_pairs, check_trainable
from stash_trainer.pairs.feedback import FeedbackExtractor
from stash_trainer.pairs.inputs import SourceTrace
from stash_trainer.worker import job as contract

log = structlog.get_logger()
SERVICE = "trainer"
# What a launcher runs for a training job: `python -m stash_trainer.worker --job <job key>`.
WORKER_MODULE = "stash_trainer.worker"
# The key of job.json under which the dispatcher keeps the revision of each selected trace it read.
TRACE_REVISIONS = "trace_revisions"
JOB_KIND = JobKind(
    service=SERVICE,
    worker="train",
    noun="reward model",
    rows=store.RewardModelRow,
    topic="trainer.models",
    files=(*contract.INPUT_FILES, *contract.OUTPUT_FILES),
    started={"stage": "training"},
)
Row = TypeVar("Row", bound=BaseModel)


@dataclass(frozen=True)
class JobSettings:
    """What every training job of this trainer shares."""

    report_address: str  # where workers reach this trainer's gRPC server
    max_length: int = 1024
    batch_size: int = 8
    learning_rate: float = 1e-4
    seed: int = 0
    submit_timeout: timedelta = timedelta(minutes=35)
    job_timeout: timedelta = timedelta(minutes=70)
    sweep_interval_s: float = 30.0
    lease_s: float = LEASE_S  # a claimed job's lease: a replica that died is noticed this long after
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


class Dispatcher(JobDispatcher):
    """Claims queued models, uploads their jobs' inputs and launches their workers; publishes a success's scores."""

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
        timing = DispatchTiming(
            settings.submit_timeout, settings.job_timeout, settings.sweep_interval_s, settings.lease_s
        )
        super().__init__(JOB_KIND, sessions, objects, launcher, wakeups, timing)
        self.traces = traces
        self.scores = scores
        self.settings = settings
        self.extractor = extractor

    def prepare(self, row_id: str, job_id: str) -> str:
        """Build the pairs, record them with the feedback report, and upload the job's files; their key."""
        with transaction(self.sessions) as session:
            row = store.running_job(session, row_id, job_id)
            owner_id, trace_ids, config = row.owner_id, list(row.trace_ids), dict(row.training_config or {})
            max_pairs, epochs, base_model = row.max_pairs, row.epochs, row.base_model
        traces = [self.traces.source_trace(owner_id, trace_id) for trace_id in trace_ids]
        pair_set = build_pairs(traces, config or None, max_pairs, self.extractor, self.settings.seed)
        with transaction(self.sessions) as session:
            row = store.running_job(session, row_id, job_id)
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
            # Where the worker reports and what it uploads (the worker's `TrainJob` ignores these keys).
            "job_id": job_id,
            "owner_id": owner_id,
            "reward_model_id": row_id,
            "archive_key": archive_key(owner_id, row_id),
            "report_address": self.settings.report_address,
            TRACE_REVISIONS: {trace.id: trace.revision for trace in traces},
        }
        key = job_key(SERVICE, job_id)
        with tempfile.TemporaryDirectory(prefix="stash-train-job-") as staging:
            upload_files(self.objects, key, write_job_dir(Path(staging), job, pair_set, traces), contract.INPUT_FILES)
        return key

    def publish_job_scores(self, owner_id: str, model_id: str, job_id: str) -> None:
        """Hand the scorer a succeeded model's uploaded scores; a scorer that cannot take them fails nothing."""
        scores = self._training_scores(model_id, job_id)
        try:
            published = self.scores.publish_training_scores(owner_id, model_id, scores)
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

    def _training_scores(self, model_id: str, job_id: str) -> list[TrainingScores]:
        key = job_key(SERVICE, job_id)
        try:
            with tempfile.TemporaryDirectory(prefix="stash-train-scores-") as scratch:
                names = (contract.JOB_FILE, contract.SCORES_FILE, contract.ACTION_SCORES_FILE)
                download_files(self.objects, key, Path(scratch), names)
                return read_training_scores(Path(scratch))
        except (StashError, OSError, KeyError, orjson.JSONDecodeError) as error:
            # Publishing none still tells the scorer the model is ready, and it scores these traces itself.
            log.warning("the training job's scores are unusable", reward_model_id=model_id, error=str(error))
            return []


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
