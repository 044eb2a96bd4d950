"""Training jobs: from a claimed model to uploaded job inputs, a launched worker, and a recorded result.

The dispatcher (`stash_common.jobs.dispatch.RowDispatcher`) claims a queued model; `prepare` reads the
selected traces with their latest evaluations through a `TraceSource`, builds the preference pairs,
records the pairs and the feedback report (before the minimum-pair check, so a failed model keeps its
report), and uploads the job's files of the spec's contract to object storage under
`jobs/trainer/<job_id>/`. The worker downloads them into its own scratch space, uploads the checkpoint
archive to `reward-models/<owner_id>/<model_id>.tar.gz` and its score files beside the inputs, and
reports progress and its result to `TrainerService` (`ReportJobProgress`, `CompleteJob`); a worker that
ends without reporting fails the model with how it ended. A recovery sweep fails interrupted
submissions and overdue jobs.

Once the worker of a model that succeeded has ended, `job_ended` tells the scorer the job's key
through a `ScorePublisher`; the scorer reads the worker's score files (`scores.jsonl`,
`action_scores.jsonl`) itself, at the trace revisions the dispatcher read (kept in `job.json`,
which the worker ignores; `stash_common.jobs.training_scores`), before the job's files are
deleted. A trained checkpoint outweighs its scores, so a scorer out of reach is logged, fails
nothing, and leaves those traces to the scorer's own background scoring.

A shared evaluator candidate (`stash_trainer.evaluator.releases`) is a model of the service account
`shared-evaluator` and takes the same path: its job trains on its corpus snapshot's pairs and then scores
both actions of every benchmark comparison (as action items). Once it succeeded the scorer is told its
job, retried while out of reach since a release names that job after its files are gone, and the
candidate's report and gate decision are recorded from the scores its worker left. A trainer that stops
between the worker's success and the gate leaves the candidate trained but ungated, with its job's files
in place: the recovery sweep of any replica (the first runs at start) resumes it, telling the scorer and
gating it from those files, or refuses it with the reason when the files are gone.

This is policy, not transport: no gRPC and no `stash.rm.v1` message reaches it
(`stash_trainer.clients` is the edge), which an import-linter contract keeps true.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol

import orjson
import structlog
from pydantic import BaseModel, ConfigDict
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from stash_common.coordination import Wakeups
from stash_common.db import transaction, utc_now
from stash_common.errors import StashError, Unavailable
from stash_common.jobs.dispatch import LEASE_S, DispatchTiming, RowDispatcher, RowJobKind
from stash_common.jobs.files import read_jsonl
from stash_common.jobs.launch import JobEnd, Launcher
from stash_common.jobs.training_scores import ACTION_SCORES_FILE, TRACE_REVISIONS
from stash_common.jobs.transfer import delete_files, download_files, job_key, upload_files
from stash_common.rendering import is_rendered, render_example, render_trace
from stash_common.storage import ObjectStore
from stash_trainer import job_contract as contract
from stash_trainer import store
from stash_trainer.evaluator import releases
from stash_trainer.evaluator.corpus import task_group
from stash_trainer.pairs.dataset import PairSet, build_pairs, check_trainable
from stash_trainer.pairs.feedback import FeedbackExtractor
from stash_trainer.pairs.inputs import SourceTrace

log = structlog.get_logger()
SERVICE = "trainer"
SETTLE_ATTEMPTS = 3  # a candidate released at the same moment as another one is gated again
GONE_REASON = (
    "the trainer stopped before gating this candidate and its worker's benchmark scores are gone; train a new one"
)
MAX_RETRY_S = 30.0  # the longest wait between two attempts to reach the scorer with a candidate's job
JOB_KIND = RowJobKind(
    service=SERVICE,
    worker="train",
    noun="reward model",
    rows=store.RewardModelRow,
    topic="trainer.models",
    files=(*contract.INPUT_FILES, *contract.OUTPUT_FILES),
    started={"stage": "training"},
)


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

    def publish_training_scores(self, owner_id: str, reward_model_id: str, job_key: str) -> PublishedScores:
        """Have the scorer publish the scores stored under `job_key`; out of reach `Unavailable`, else a refusal."""
        ...


def archive_key(owner_id: str, model_id: str) -> str:
    """Where a model's checkpoint archive lives in object storage."""
    return f"reward-models/{owner_id}/{model_id}.tar.gz"


class Dispatcher(RowDispatcher):
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
        candidate_settled: Callable[[], object] = lambda: None,
    ) -> None:
        timing = DispatchTiming(
            settings.submit_timeout, settings.job_timeout, settings.sweep_interval_s, settings.lease_s
        )
        super().__init__(JOB_KIND, sessions, objects, launcher, wakeups, timing)
        self.traces = traces
        self.scores = scores
        self.settings = settings
        self.extractor = extractor
        self.candidate_settled = candidate_settled  # a candidate was gated (and maybe released): publish it
        self._settling: set[str] = set()  # the candidates this process's watchers are gating

    def prepare(self, row_id: str, job_id: str) -> str:
        """Build the pairs, record them with the feedback report, and upload the job's files; their key."""
        with transaction(self.sessions) as session:
            row = store.running_job(session, row_id, job_id)
            candidate = releases.is_candidate(row)
            owner_id, trace_ids, config = row.owner_id, list(row.trace_ids), dict(row.training_config or {})
            max_pairs, epochs, base_model = row.max_pairs, row.epochs, row.base_model
        if candidate:
            return self.prepare_candidate(row_id, job_id)
        traces = [self.traces.source_trace(owner_id, trace_id) for trace_id in trace_ids]
        pair_set = build_pairs(traces, config or None, max_pairs, self.extractor, self.settings.seed)
        version_3 = config.get("input_version") == 3
        with transaction(self.sessions) as session:
            row = store.running_job(session, row_id, job_id)
            eval_trace_ids = None
            if version_3:
                seed = f"{self.settings.seed}:{row_id}"
                row.eval_task_groups, eval_trace_ids = eval_split(traces, row.eval_task_groups, seed)
            feedback = (
                pair_set.feedback if eval_trace_ids is None else mark_evaluated(pair_set.feedback, eval_trace_ids)
            )
            row.feedback = list(feedback) if feedback is not None else None
            row.feedback_job_id = job_id
            row.num_pairs = len(pair_set.pairs)
            store.save_pairs(session, row, [pair.to_job_line() for pair in pair_set.pairs])
        check_trainable(pair_set.pairs)
        job = {
            **self.job_json(owner_id, row_id, job_id, (base_model, epochs, max_pairs)),
            "eval_trace_ids": eval_trace_ids,
            "input_version": 3 if version_3 else 1,
            TRACE_REVISIONS: {trace.id: trace.revision for trace in traces},
        }
        key = job_key(SERVICE, job_id)
        with tempfile.TemporaryDirectory(prefix="stash-train-job-") as staging:
            job_dir = write_job_dir(Path(staging), job, pair_set, traces, sections=version_3)
            upload_files(self.objects, key, job_dir, contract.INPUT_FILES)
        return key

    def prepare_candidate(self, row_id: str, job_id: str) -> str:
        """Upload a shared evaluator candidate's job: its snapshot's pairs, and its benchmarks' items to score."""
        with transaction(self.sessions) as session:
            row = store.running_job(session, row_id, job_id)
            lines, items = releases.training_inputs(session, self.objects, row_id, self.settings.seed)
            row.num_pairs = len(lines)
            job = {
                **self.job_json(row.owner_id, row_id, job_id, (row.base_model, row.epochs, row.max_pairs)),
                TRACE_REVISIONS: {},
            }
        key = job_key(SERVICE, job_id)
        with tempfile.TemporaryDirectory(prefix="stash-train-job-") as staging:
            job_dir = Path(staging)
            (job_dir / contract.JOB_FILE).write_bytes(orjson.dumps(job))
            _write_jsonl(job_dir / contract.PAIRS_FILE, lines)
            _write_jsonl(job_dir / contract.SCORE_ITEMS_FILE, [])
            _write_jsonl(job_dir / contract.ACTION_SCORE_ITEMS_FILE, items)
            upload_files(self.objects, key, job_dir, contract.INPUT_FILES)
        return key

    def job_json(self, owner_id: str, row_id: str, job_id: str, training: tuple[str, int, int]) -> dict[str, Any]:
        """The keys of `job.json` every training job shares: what to train and where the worker reports."""
        base_model, epochs, max_pairs = training
        return {
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
        }

    def job_ended(self, row_id: str, job_id: str, end: JobEnd) -> None:
        """A model its worker left running fails; one it reported succeeded has its scores published, and a
        shared evaluator candidate is evaluated and gated first."""
        super().job_ended(row_id, job_id, end)
        with transaction(self.sessions) as session:
            row = session.get(store.RewardModelRow, row_id)
            succeeded = row is not None and row.status == store.SUCCEEDED and row.job_id == job_id
            owner_id = row.owner_id if row is not None else ""
            candidate = row is not None and releases.is_candidate(row)
        if succeeded and candidate:
            with self._lock:
                self._settling.add(row_id)
            try:
                self.introduce_candidate(row_id, job_id)
                self.settle_candidate(row_id, job_id)
            finally:
                with self._lock:
                    self._settling.discard(row_id)
        elif succeeded:
            self.publish_job_scores(owner_id, row_id, job_id)

    def introduce_candidate(self, row_id: str, job_id: str) -> None:
        """Tell the scorer a candidate's training job while its files exist, since a release names the job: the
        scorer finds the checkpoint by it later. Retried while the scorer is out of reach."""
        delay_s = 1.0
        while not self._stopping.is_set():
            try:
                self.scores.publish_training_scores(releases.EVALUATOR_OWNER, row_id, job_key(SERVICE, job_id))
                return
            except Unavailable as error:
                log.info("the scorer is out of reach; telling it the candidate again", error=error.message)
                self._stopping.wait(delay_s)
                delay_s = min(delay_s * 2, MAX_RETRY_S)
            except StashError as error:
                log.warning("the scorer refused a candidate's training job", candidate_id=row_id, error=error.message)
                return

    def sweep(self) -> list[str]:
        """The recovery sweep every job kind shares, then the candidates a stopped trainer left ungated."""
        failed = super().sweep()
        self.resume_ungated_candidates()
        return failed

    def resume_ungated_candidates(self) -> list[str]:
        """Tell the scorer and gate each candidate trained at least a lease ago that no watcher here is gating (its
        trainer stopped before the gate); one whose job's files are gone is refused with why. Their ids.

        A scorer out of reach raises `Unavailable`, so the sweep retries later. A replica still gating one of them
        itself is harmless: a candidate is gated once (`releases.settle`)."""
        with transaction(self.sessions) as session:
            ungated = releases.ungated(session, utc_now() - self.timing.lease)
        with self._lock:
            busy = self._settling | set(self._running)
        resumed = []
        for row_id, job_id in ungated:
            if row_id in busy:
                continue
            key = job_key(SERVICE, job_id)
            log.warning("resuming a candidate its trainer stopped before gating", candidate_id=row_id, job_id=job_id)
            if self.objects.exists(f"{key}/{ACTION_SCORES_FILE}"):
                self.scores.publish_training_scores(releases.EVALUATOR_OWNER, row_id, key)
                self.settle_candidate(row_id, job_id)
                delete_files(self.objects, key, self.kind.files)
            else:
                with transaction(self.sessions) as session:
                    releases.fail(session, row_id, GONE_REASON)
                self.candidate_settled()
            resumed.append(row_id)
        return resumed

    def settle_candidate(self, row_id: str, job_id: str) -> None:
        """Evaluate a trained candidate on its benchmarks from the scores its worker left, and gate it."""
        try:
            scores = benchmark_scores(self.objects, job_key(SERVICE, job_id))
        except (StashError, OSError, ValueError) as error:
            with transaction(self.sessions) as session:
                releases.fail(session, row_id, f"the candidate's benchmark scores are unreadable: {error}")
            return
        for attempt in range(SETTLE_ATTEMPTS):
            try:
                with transaction(self.sessions) as session:
                    if scores:
                        row = releases.settle(session, row_id, scores)
                        log.info("shared evaluator candidate gated", candidate_id=row_id, decision=row.decision)
                    else:
                        reason = "the worker scored no benchmark item: no action pair was trained"
                        releases.fail(session, row_id, reason)
                break
            except IntegrityError:  # another candidate took the release number first: gate again against it
                if attempt == SETTLE_ATTEMPTS - 1:
                    raise
        self.candidate_settled()

    def publish_job_scores(self, owner_id: str, model_id: str, job_id: str) -> None:
        """Have the scorer publish a succeeded model's uploaded scores; a scorer that cannot fails nothing."""
        try:
            published = self.scores.publish_training_scores(owner_id, model_id, job_key(SERVICE, job_id))
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


def benchmark_scores(objects: ObjectStore, key: str) -> dict[tuple[str, str], float]:
    """The raw scores a candidate's worker left for its benchmark items, by (benchmark version id, item step id)."""
    with tempfile.TemporaryDirectory(prefix="stash-candidate-scores-") as scratch:
        folder = Path(scratch)
        if ACTION_SCORES_FILE not in download_files(objects, key, folder, (ACTION_SCORES_FILE,)):
            return {}
        rows = read_jsonl(folder / ACTION_SCORES_FILE, _ItemScore)
    return {(row.trace_id, row.step_id): row.score for row in rows}


class _ItemScore(BaseModel):
    """What a candidate's evaluation reads of a line of the worker's `action_scores.jsonl`."""

    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)

    trace_id: str
    step_id: str
    score: float


def eval_split(traces: list[SourceTrace], stored: list[str] | None, seed: str) -> tuple[list[str], list[str]]:
    """An input version 3 model's held-out task groups (the stored ones, else a seeded draw) and their traces' ids."""
    groups = (
        stored if stored is not None else contract.draw_eval_task_groups({task_group(trace) for trace in traces}, seed)
    )
    held = set(groups)
    return groups, sorted(trace.id for trace in traces if task_group(trace) in held)


def mark_evaluated(
    feedback: tuple[dict[str, Any], ...] | None, eval_trace_ids: list[str]
) -> tuple[dict[str, Any], ...] | None:
    """The report with `included_in_evaluation`: a kept pair of a held-out trace evaluates instead of training."""
    if feedback is None:
        return None
    held = set(eval_trace_ids)
    return tuple(
        {
            **item,
            "included_in_training": item["included_in_training"] and item["trace_id"] not in held,
            "included_in_evaluation": item["included_in_training"] and item["trace_id"] in held,
        }
        for item in feedback
    )


def write_job_dir(
    job_dir: Path, job: dict[str, Any], pair_set: PairSet, traces: list[SourceTrace], sections: bool = False
) -> Path:
    """The spec's job directory: job.json, pairs.jsonl and the items to score after training (`sections`: action
    examples with input version 3's marked context sections)."""
    job_dir.mkdir(parents=True, exist_ok=True)
    (job_dir / contract.JOB_FILE).write_bytes(orjson.dumps(job))
    (job_dir / contract.PAIRS_FILE).write_text(pair_set.to_jsonl(), encoding="utf-8")
    trace_items = [{"trace_id": trace.id, "text": render_trace(trace.steps)} for trace in traces]
    action_items = [
        {"trace_id": trace.id, "step_id": step.id, "text": render_example(trace.steps, step.index, sections=sections)}
        for trace in traces
        for step in trace.steps
        if step.is_action and is_rendered(step)
    ]
    _write_jsonl(job_dir / contract.SCORE_ITEMS_FILE, [item for item in trace_items if item["text"]])
    _write_jsonl(job_dir / contract.ACTION_SCORE_ITEMS_FILE, action_items)
    return job_dir


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
