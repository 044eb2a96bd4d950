"""One GEPA job, start to finish: read the directory, fetch the checkpoint, name the skill, optimise, write the result.

Everything that can fail without a model (the job files, the providers' keys, the archive, the
reward statistics) is checked before torch is imported. The seed body is evaluated first, then GEPA
proposes bodies with the reflection model until the metric-call budget is spent; the budget spent
goes to `on_progress` (by hand: `progress.json`; launched: a report to the service). `result.json`
is always written: the spec's result on success, else the error.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

import gepa
from gepa.core.callbacks import BudgetUpdatedEvent, GEPACallback

from stash_common.errors import StashError
from stash_common.jobs.files import job_log
from stash_common.reward_model.stats import REWARD_STATS_FILE, read_stats
from stash_common.settings import load
from stash_common.worker_storage import WorkerStorageSettings, fetch_checkpoint
from stash_gepa.job_contract import (
    LOG_FILE,
    Candidate,
    ExampleFailure,
    GepaExample,
    GepaJob,
    GepaResult,
    Timings,
    read_examples,
    read_job,
    write_progress,
    write_result,
)
from stash_gepa.worker.adapter import SkillAdapter
from stash_gepa.worker.models import ChatModel
from stash_gepa.worker.skill import COMPONENT, SEED_BODY, SkillIdentity, naming_prompt, parse_identity, render_skill

LOG = logging.getLogger(__name__)


ProgressCallback = Callable[[int], None]  # the metric calls used so far


class BudgetProgress:
    """A GEPA callback that passes the metric calls used to `on_progress`."""

    def __init__(self, on_progress: ProgressCallback) -> None:
        self.on_progress = on_progress

    def on_budget_updated(self, event: BudgetUpdatedEvent) -> None:
        """Pass on the budget GEPA has spent."""
        self.on_progress(event["metric_calls_used"])


class LogLines:
    """GEPA's log, into worker.log."""

    def log(self, message: str) -> None:
        """One line of GEPA's own log."""
        LOG.info("gepa: %s", message)


def run_job(job_dir: Path, on_progress: ProgressCallback | None = None) -> int:
    """Run the GEPA job in `job_dir`, always writing `result.json`; 0 on success, 1 on failure.

    The metric calls used go to `on_progress`, or into `progress.json` without one.
    """
    with job_log(job_dir / LOG_FILE):
        try:
            result = optimise(job_dir, on_progress or (lambda used: write_progress(job_dir, used)))
        except StashError as error:
            return fail(job_dir, error.message)
        except Exception as error:  # the service must still find a result.json with the reason
            LOG.exception("GEPA job failed unexpectedly")
            return fail(job_dir, f"GEPA failed: {type(error).__name__}: {error} (worker.log has details)")
        write_result(job_dir, result)
        LOG.info("GEPA job succeeded: best score %.3f (seed %.3f)", result.best_score, result.seed_score)
    return 0


def fail(job_dir: Path, message: str) -> int:
    """Write the error as the job's result; the exit code of a failed job."""
    LOG.error("GEPA job failed: %s", message)
    write_result(job_dir, GepaResult(error=message))
    return 1


def optimise(job_dir: Path, on_progress: ProgressCallback) -> GepaResult:
    """The best skill GEPA finds for the job's examples, with the seed and every candidate."""
    started = time.perf_counter()
    job, examples = read_job(job_dir), read_examples(job_dir)
    task = ChatModel("task", job.task_model, job.task_api_base, "task_model (and task_api_base) of the GEPA run")
    reflection = ChatModel(
        "reflection", job.reflection_model, job.reflection_api_base, "reflection_model of the GEPA run"
    )
    task.check_credentials()
    reflection.check_credentials()
    train, validation = split(examples, job)
    objects = load(WorkerStorageSettings).object_store()
    with tempfile.TemporaryDirectory(prefix="stash-gepa-") as scratch:
        model_dir = fetch_checkpoint(objects, job.reward_model_id, job.reward_model_key, Path(scratch))
        read_stats(model_dir / REWARD_STATS_FILE)  # a checkpoint without it fails here, before torch loads
        naming_started = time.perf_counter()
        identity = parse_identity(reflection.complete([{"role": "user", "content": naming_prompt(examples)}]))
        naming_s = time.perf_counter() - naming_started
        LOG.info("skill named %s: %s", identity.name, identity.description)
        # Imported here: torch and transformers take seconds to load, and every check above runs first.
        from stash_gepa.worker.reward import RewardMetric

        adapter = SkillAdapter(identity, task, reflection, RewardMetric(model_dir, job), job.task_concurrency)
        startup_s = time.perf_counter() - started - naming_s
        outcome: gepa.GEPAResult[str, int] = gepa.optimize(
            seed_candidate={COMPONENT: SEED_BODY},
            trainset=train,
            valset=validation,
            adapter=adapter,
            max_metric_calls=job.max_metric_calls,
            reflection_minibatch_size=job.reflection_minibatch_size,
            seed=job.seed,
            # gepa calls only the methods a callback has: every method of its protocol is optional.
            callbacks=[cast(GEPACallback, BudgetProgress(on_progress))],
            logger=LogLines(),
        )
    timings = Timings(
        task_model_s=adapter.task_seconds,
        reward_model_s=adapter.metric_seconds,
        reflection_s=naming_s + adapter.reflection_seconds,
        startup_s=startup_s,
        total_s=time.perf_counter() - started,
    )
    return result_of(outcome, identity, adapter, timings)


def split(examples: list[GepaExample], job: GepaJob) -> tuple[list[GepaExample], list[GepaExample]]:
    """GEPA's train and validation sets as the service chose them (one example is both)."""
    chosen = set(job.validation_trace_ids)
    validation = [example for example in examples if example.trace_id in chosen]
    train = [example for example in examples if example.trace_id not in chosen] or validation
    return train, validation


def result_of(
    outcome: gepa.GEPAResult[str, int], identity: SkillIdentity, adapter: SkillAdapter, timings: Timings
) -> GepaResult:
    """The spec's result: the best skill, the seed (GEPA's candidate 0), every candidate with its score."""
    candidates = [
        Candidate(skill=render_skill(identity, candidate[COMPONENT]), score=score)
        for candidate, score in zip(outcome.candidates, outcome.val_aggregate_scores, strict=True)
    ]
    best, seed = candidates[outcome.best_idx], candidates[0]
    return GepaResult(
        skill_name=identity.name,
        skill_description=identity.description,
        best_skill=best.skill,
        best_score=best.score,
        seed_skill=seed.skill,
        seed_score=seed.score,
        candidates=candidates,
        example_failures=[ExampleFailure(trace_id=key, error=error) for key, error in sorted(adapter.failures.items())],
        metric_calls=outcome.total_metric_calls,
        timings=timings,
    )
