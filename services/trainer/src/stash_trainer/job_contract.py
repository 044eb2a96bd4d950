"""The job directory contract between the trainer service and this worker (the spec's file formats).

`job.json`, `pairs.jsonl`, `score_items.jsonl` and `action_score_items.jsonl` are read and validated
here, and `progress.json` and `result.json` written; `scores.jsonl` and `action_scores.jsonl` are
written with `stash_common.jobs.files`, the reward statistics with `stash_common.reward_model.stats`
(the scorer reads them back). Validation errors name the file, the line and the field.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from stash_common.errors import FailedPrecondition, InvalidArgument
from stash_common.jobs.files import describe, read_jsonl, write_json
from stash_common.jobs.training_scores import ACTION_SCORES_FILE, JOB_FILE, SCORES_FILE
from stash_common.training_metrics import check_training_metrics
from stash_trainer.worker.pairs import Pair
from stash_trainer.worker.split import held_out_sample

PAIRS_FILE = "pairs.jsonl"
SCORE_ITEMS_FILE = "score_items.jsonl"
ACTION_SCORE_ITEMS_FILE = "action_score_items.jsonl"
RESULT_FILE = "result.json"
PROGRESS_FILE = "progress.json"
MODEL_DIR = "model"
LOG_FILE = "worker.log"
# What the trainer uploads under the job's key and the worker downloads, and what the worker uploads beside them.
INPUT_FILES = (JOB_FILE, PAIRS_FILE, SCORE_ITEMS_FILE, ACTION_SCORE_ITEMS_FILE)
OUTPUT_FILES = (RESULT_FILE, SCORES_FILE, ACTION_SCORES_FILE)


class TrainJob(BaseModel):
    """`job.json` of a training job; keys the worker does not use are ignored."""

    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)

    kind: Literal["train"]
    base_model: str = Field(min_length=1)
    epochs: int = Field(ge=1)
    max_pairs: int = Field(ge=2)
    seed: int = Field(ge=0)
    max_length: int = Field(default=1024, ge=8)
    batch_size: int = Field(default=8, ge=1)
    learning_rate: float = Field(default=1e-4, gt=0, allow_inf_nan=False)
    # STASH_TRAINER_DEVICE: `auto` picks CUDA, then MPS, then CPU; the others pin the device.
    device: Literal["auto", "cpu", "cuda", "mps"] = "auto"
    # Input version 3: the traces of the model's frozen held-out task groups; None draws by trace per job.
    eval_trace_ids: list[str] | None = None
    # 3: the texts carry section marks and train in the sectioned 4,096-token window instead of `max_length`.
    input_version: Literal[1, 3] = 1


class PairRecord(BaseModel):
    """One line of `pairs.jsonl`; evidence fields are ignored."""

    model_config = ConfigDict(extra="ignore", strict=True)

    chosen: str = Field(min_length=1)
    rejected: str = Field(min_length=1)
    trace_id: str | None = Field(default=None, min_length=1)
    trace_ids: list[str] | None = None
    granularity: Literal["trace", "action"]
    action_type: Literal["response", "tool_call", "mixed"] | None = None

    @model_validator(mode="after")
    def _names_its_traces(self) -> PairRecord:
        if not self.trace_id and not self.trace_ids:
            raise ValueError("a pair needs `trace_id` or a nonempty `trace_ids`")
        if self.trace_ids is not None and not all(self.trace_ids):
            raise ValueError("`trace_ids` must not contain empty ids")
        return self

    def to_pair(self) -> Pair:
        """The domain pair, with its source traces in order and without duplicates."""
        ids = ([self.trace_id] if self.trace_id else []) + list(self.trace_ids or [])
        return Pair(self.chosen, self.rejected, tuple(dict.fromkeys(ids)), self.granularity, self.action_type)


class ScoreItem(BaseModel):
    """One line of `score_items.jsonl`: a whole trace's rendered text."""

    model_config = ConfigDict(extra="ignore", strict=True)

    trace_id: str = Field(min_length=1)
    text: str = Field(min_length=1)


class ActionScoreItem(BaseModel):
    """One line of `action_score_items.jsonl`: the context ending at one assistant action."""

    model_config = ConfigDict(extra="ignore", strict=True)

    trace_id: str = Field(min_length=1)
    step_id: str = Field(min_length=1)
    text: str = Field(min_length=1)


def read_job(job_dir: Path) -> TrainJob:
    """Read and validate `job.json`."""
    path = job_dir / JOB_FILE
    if not path.is_file():
        raise FailedPrecondition(f"{path} is missing: the trainer writes job.json before it launches the worker")
    try:
        return TrainJob.model_validate_json(path.read_bytes())
    except ValidationError as error:
        raise InvalidArgument(JOB_FILE, describe(error)) from error


def read_pairs(job_dir: Path) -> list[Pair]:
    """The preference pairs of `pairs.jsonl`, in file order."""
    path = job_dir / PAIRS_FILE
    if not path.is_file():
        raise FailedPrecondition(f"{path} is missing: the trainer writes pairs.jsonl before it launches the worker")
    return [row.to_pair() for row in read_jsonl(path, PairRecord)]


def read_score_items(job_dir: Path) -> list[ScoreItem]:
    """The traces to score after training; none when the file is absent."""
    path = job_dir / SCORE_ITEMS_FILE
    return read_jsonl(path, ScoreItem) if path.is_file() else []


def read_action_score_items(job_dir: Path) -> list[ActionScoreItem]:
    """The assistant actions to score after training; none when the file is absent."""
    path = job_dir / ACTION_SCORE_ITEMS_FILE
    return read_jsonl(path, ActionScoreItem) if path.is_file() else []


def write_progress(job_dir: Path, step: int, total_steps: int, loss: float | None) -> None:
    """Write `progress.json`: `{"step", "total_steps", "loss"}` after an optimizer step (the trainer polls it).

    `loss` is None when the step's loss was not finite (JSON has no NaN).
    """
    write_json(job_dir / PROGRESS_FILE, {"step": step, "total_steps": total_steps, "loss": loss})


def write_result(job_dir: Path, metrics: Mapping[str, Any]) -> None:
    """Write a successful `result.json`: `{"metrics": {...}}`, keyed by exactly TRAINING_METRIC_KEYS."""
    check_training_metrics(metrics)
    write_json(job_dir / RESULT_FILE, {"metrics": dict(metrics)})


def write_error(job_dir: Path, message: str) -> None:
    """Write a failed `result.json`: `{"error": message}`."""
    write_json(job_dir / RESULT_FILE, {"error": message})


def draw_eval_task_groups(task_groups: Collection[str], seed: int | str) -> list[str]:
    """The task groups an input version 3 model holds out (`eval_trace_ids` names their traces): none below two."""
    groups = sorted(set(task_groups))
    return sorted(held_out_sample(groups, seed)) if len(groups) >= 2 else []
