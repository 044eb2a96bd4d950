"""One training job, start to finish: validate the directory, train, evaluate, save, score, report.

Everything that can be checked without a model (the job, the pairs, the split, the base model's
location) is checked before torch is imported, so a bad job fails in well under a second.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stash_common.errors import FailedPrecondition, StashError
from stash_common.jobs.files import job_log, write_jsonl
from stash_common.reward_model.stats import (
    ACTION_REWARD_STATS_FILE,
    REWARD_STATS_FILE,
    RewardStats,
    action_credit,
    reward_stats,
    write_stats,
)
from stash_common.reward_model.window import write_input_window
from stash_trainer import job_contract as contract
from stash_trainer.job_contract import ActionScoreItem, ScoreItem, TrainJob
from stash_trainer.worker.models import resolve_base_model
from stash_trainer.worker.pairs import Pair, cap_pairs
from stash_trainer.worker.split import TraceSplit, split_by_held_out_traces, split_by_trace
from stash_trainer.worker.stats import EvalReport, evaluate_pairs, require_finite

if TYPE_CHECKING:
    from stash_trainer.worker.training import ProgressCallback

LOG = logging.getLogger(__name__)
ACTION_SCORING_VERSION = 1
Scorer = Callable[[Sequence[str]], list[float]]


@dataclass(frozen=True)
class PreparedJob:
    """A validated job directory: parameters, split pairs, items to score and the base checkpoint's folder."""

    job: TrainJob
    split: TraceSplit
    score_items: tuple[ScoreItem, ...]
    action_score_items: tuple[ActionScoreItem, ...]
    base_model: Path


@dataclass(frozen=True)
class JobScores:
    """Rewards of every text the job scores after training, grouped by purpose."""

    train_chosen: list[float]
    train_rejected: list[float]
    eval_margins: list[float]
    traces: list[float]
    actions: list[float]


def run_job(job_dir: Path, on_progress: ProgressCallback | None = None) -> int:
    """Run the training job in `job_dir`, always writing `result.json`; 0 on success, 1 on failure."""
    with job_log(job_dir / contract.LOG_FILE):
        started = time.perf_counter()
        try:
            metrics = {**train_job(job_dir, on_progress), "seconds": round(time.perf_counter() - started, 3)}
            contract.write_result(job_dir, metrics)
        except StashError as error:
            LOG.error("training job failed: %s", error.message)
            contract.write_error(job_dir, error.message)
            return 1
        except Exception as error:  # the job must still leave a result.json behind
            LOG.exception("training job failed unexpectedly")
            contract.write_error(job_dir, f"training failed: {type(error).__name__}: {error} (worker.log has details)")
            return 1
        LOG.info("training job succeeded: %s", metrics)
    return 0


def prepare_job(job_dir: Path) -> PreparedJob:
    """Read and validate the directory, cap and split the pairs, and locate the base model; loads no model."""
    job = contract.read_job(job_dir)
    pairs = contract.read_pairs(job_dir)
    if len(pairs) < 2:
        raise FailedPrecondition(
            f"pairs.jsonl has {len(pairs)} preference pair(s) but training needs at least 2: rate or comment on"
            " more assistant responses, or select more traces, then retry"
        )
    capped = cap_pairs(pairs, job.max_pairs, job.seed)
    if job.eval_trace_ids is None:
        split = split_by_trace(capped, job.seed)
    else:
        split = split_by_held_out_traces(capped, job.eval_trace_ids)
    LOG.info(
        "%d pairs: %d train, %d eval, %d excluded across the split",
        len(pairs),
        len(split.train),
        len(split.eval),
        split.excluded_cross_trace_pairs,
    )
    return PreparedJob(
        job=job,
        split=split,
        score_items=tuple(contract.read_score_items(job_dir)),
        action_score_items=tuple(contract.read_action_score_items(job_dir)),
        base_model=resolve_base_model(job.base_model),
    )


def train_job(job_dir: Path, on_progress: ProgressCallback | None = None) -> dict[str, Any]:
    """Train, save the checkpoint under `model/`, write scores and statistics; the metrics without `seconds`."""
    prepared = prepare_job(job_dir)
    # Imported here: torch and transformers take seconds to load, and every check above runs first.
    from stash_common.reward_model.device import configure_threads, select_device
    from stash_common.reward_model.inference import score_texts
    from stash_trainer.worker import training
    from stash_trainer.worker.precision import bf16_training

    job = prepared.job
    device = select_device() if job.device == "auto" else job.device
    limit, sectioned = training.token_window(job)
    threads, products = configure_threads(device), "bf16" if bf16_training(device) else "fp32"
    LOG.info("training %s on %s (%d threads, %s matrix products)", prepared.base_model, device, threads, products)
    with training.out_of_memory_advice(job):
        model, tokenizer = training.load_reward_model(prepared.base_model, device, limit, job.seed)
        outcome = training.train_reward_model(
            model, tokenizer, prepared.split.train, job, device, job_progress(job_dir, on_progress)
        )
        require_finite("the training loss", [outcome.final_loss])
        model_dir = job_dir / contract.MODEL_DIR
        model.save_pretrained(model_dir)
        tokenizer.save_pretrained(model_dir)
        if sectioned:
            write_input_window(model_dir)
        report, action_train_pairs = write_outputs(
            prepared,
            job_dir,
            lambda texts: score_texts(model, tokenizer, texts, limit, device, 4 * job.batch_size, sectioned),
        )
    return training_metrics(prepared, report, action_train_pairs, outcome.final_loss, device)


def job_progress(job_dir: Path, on_progress: ProgressCallback | None) -> ProgressCallback:
    """After each step: write `progress.json`, log every tenth step (and the last), then call `on_progress`."""

    def report(step: int, total: int, loss: float) -> None:
        contract.write_progress(job_dir, step, total, loss if math.isfinite(loss) else None)
        if step % 10 == 0 or step == total:
            LOG.info("step %d/%d loss %.4f", step, total, loss)
        if on_progress is not None:
            on_progress(step, total, loss)

    return report


def score_job(prepared: PreparedJob, score: Scorer) -> JobScores:
    """Score every text the job needs in one pass (one length-sorted batching over all of them)."""
    train, held = prepared.split.train, prepared.split.eval
    groups = [
        [pair.chosen for pair in train],
        [pair.rejected for pair in train],
        [pair.chosen for pair in held],
        [pair.rejected for pair in held],
        [item.text for item in prepared.score_items],
        [item.text for item in prepared.action_score_items],
    ]
    flat = score([text for group in groups for text in group])
    require_finite("the scored texts", flat)
    parts, start = [], 0
    for group in groups:
        parts.append(flat[start : start + len(group)])
        start += len(group)
    margins = [c - r for c, r in zip(parts[2], parts[3], strict=True)]
    return JobScores(parts[0], parts[1], margins, parts[4], parts[5])


def write_outputs(prepared: PreparedJob, job_dir: Path, score: Scorer) -> tuple[EvalReport, int]:
    """Evaluate, write reward statistics and score files; the held-out report and the action pair count."""
    scores = score_job(prepared, score)
    train = prepared.split.train
    model_dir = job_dir / contract.MODEL_DIR
    write_stats(model_dir / REWARD_STATS_FILE, reward_stats(scores.train_chosen + scores.train_rejected))
    trace_rows = [
        {"trace_id": i.trace_id, "score": s} for i, s in zip(prepared.score_items, scores.traces, strict=True)
    ]
    write_jsonl(job_dir / contract.SCORES_FILE, trace_rows)
    action_stats = training_action_stats(train, scores)
    if action_stats is None:
        LOG.info("no action pairs were trained: %d action items left unscored", len(prepared.action_score_items))
    else:
        write_stats(model_dir / ACTION_REWARD_STATS_FILE, action_stats)
        write_jsonl(job_dir / contract.ACTION_SCORES_FILE, action_rows(prepared, scores, action_stats))
    report = evaluate_pairs(prepared.split.eval, scores.eval_margins) if prepared.split.evaluated else EvalReport()
    return report, sum(pair.is_action for pair in train)


def training_action_stats(train: Sequence[Pair], scores: JobScores) -> RewardStats | None:
    """Reward statistics over the texts of the training action pairs; None when there are none."""
    values = [
        reward
        for pair, chosen, rejected in zip(train, scores.train_chosen, scores.train_rejected, strict=True)
        if pair.is_action
        for reward in (chosen, rejected)
    ]
    return reward_stats(values) if values else None


def action_rows(prepared: PreparedJob, scores: JobScores, stats: RewardStats) -> list[dict[str, Any]]:
    """`action_scores.jsonl` rows: raw score and display credit of every action item."""
    return [
        {"trace_id": item.trace_id, "step_id": item.step_id, "score": score, "credit": action_credit(score, stats)}
        for item, score in zip(prepared.action_score_items, scores.actions, strict=True)
    ]


def training_metrics(
    prepared: PreparedJob, report: EvalReport, action_train_pairs: int, final_loss: float, device: str
) -> dict[str, Any]:
    """`result.json` metrics: every key of TRAINING_METRIC_KEYS but `seconds`, which `run_job` adds."""
    return {
        "train_pairs": len(prepared.split.train),
        "eval_pairs": report.eval_pairs,
        "eval_accuracy": report.eval_accuracy,
        "eval_split": "trace",
        "excluded_cross_trace_pairs": prepared.split.excluded_cross_trace_pairs,
        "action_scoring_version": ACTION_SCORING_VERSION if action_train_pairs else None,
        "action_train_pairs": action_train_pairs,
        "action_eval_pairs": report.action_eval_pairs,
        "action_eval_accuracy": report.action_eval_accuracy,
        "tool_eval_pairs": report.tool_eval_pairs,
        "tool_eval_accuracy": report.tool_eval_accuracy,
        "final_loss": final_loss,
        "epochs": prepared.job.epochs,
        "device": device,
    }
