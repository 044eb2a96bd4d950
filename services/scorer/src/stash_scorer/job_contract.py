"""The score job's files: the contract between the scorer service and its worker (the spec's file formats).

The service uploads `job.json`, `action_score_items.jsonl` and `score_items.jsonl` (`INPUT_FILES`)
before it launches the worker; the worker reads its own copy, reports each trace over gRPC as soon
as it is scored (those reports are its output), and writes `result.json` in its scratch directory when
it ends (run by hand on a job directory, that is where to look). Both sides use these models, so
neither can drift from the other, and the module is free of torch: the service imports it.
Validation errors name the file, the line and the field.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from stash_common.errors import FailedPrecondition, InvalidArgument
from stash_common.jobs.files import describe, read_jsonl, write_json, write_jsonl

JOB_FILE = "job.json"
ACTION_SCORE_ITEMS_FILE = "action_score_items.jsonl"
SCORE_ITEMS_FILE = "score_items.jsonl"
RESULT_FILE = "result.json"
LOG_FILE = "worker.log"
# What the scorer uploads under the job's key and the worker downloads into its scratch directory.
INPUT_FILES = (JOB_FILE, ACTION_SCORE_ITEMS_FILE, SCORE_ITEMS_FILE)


class ScoreRun(BaseModel):
    """One scoring run of the job: one trace revision of one owner, reported on its own."""

    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)

    scoring_run_id: str = Field(min_length=1)
    owner_id: str = Field(min_length=1)
    trace_id: str = Field(min_length=1)
    trace_revision: int = Field(ge=0)


class ScoreJob(BaseModel):
    """`job.json` of a scoring job: one checkpoint and the runs it scores; unknown keys are ignored."""

    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)

    kind: Literal["score"] = "score"
    job_id: str = Field(min_length=1)
    reward_model_id: str = Field(min_length=1)
    reward_model_key: str = Field(min_length=1)
    max_length: int = Field(default=1024, ge=8)
    batch_size: int = Field(default=8, ge=1)
    scorer_address: str = Field(min_length=1)
    runs: list[ScoreRun] = Field(min_length=1)

    @model_validator(mode="after")
    def _one_run_per_trace(self) -> ScoreJob:
        traces = [run.trace_id for run in self.runs]
        if len(set(traces)) != len(traces):
            raise ValueError("each trace appears in at most one run of a job")
        return self


class ActionScoreItem(BaseModel):
    """One line of `action_score_items.jsonl`: `render_example(steps, index, sections=True)` of one eligible action."""

    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)

    trace_id: str = Field(min_length=1)
    step_id: str = Field(min_length=1)
    text: str = Field(min_length=1)


class ScoreItem(BaseModel):
    """One line of `score_items.jsonl`: `render_trace(steps)` of one trace."""

    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)

    trace_id: str = Field(min_length=1)
    text: str = Field(min_length=1)


class ScoreResult(BaseModel):
    """`result.json` of a scoring job: `{"action_count"}` when it ended normally, else `{"error"}`."""

    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)

    action_count: int | None = Field(default=None, ge=0)
    error: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _exactly_one_outcome(self) -> ScoreResult:
        if (self.action_count is None) == (self.error is None):
            raise ValueError("result.json holds exactly one of `action_count` and `error`")
        return self


def write_job(job_dir: Path, job: ScoreJob) -> None:
    """Write `job.json` (the service, before it launches the worker)."""
    write_json(job_dir / JOB_FILE, job.model_dump(mode="json"))


def write_action_score_items(job_dir: Path, items: Iterable[ActionScoreItem]) -> None:
    """Write `action_score_items.jsonl`, one eligible action per line in step order per trace."""
    write_jsonl(job_dir / ACTION_SCORE_ITEMS_FILE, (item.model_dump(mode="json") for item in items))


def write_score_items(job_dir: Path, items: Iterable[ScoreItem]) -> None:
    """Write `score_items.jsonl`, one trace per line."""
    write_jsonl(job_dir / SCORE_ITEMS_FILE, (item.model_dump(mode="json") for item in items))


def write_result(job_dir: Path, action_count: int) -> None:
    """Write a finished `result.json`: `{"action_count": n}` (the worker, once every trace is reported)."""
    write_json(job_dir / RESULT_FILE, ScoreResult(action_count=action_count).model_dump(exclude_none=True))


def write_error(job_dir: Path, message: str) -> None:
    """Write a failed `result.json`: `{"error": message}`."""
    write_json(job_dir / RESULT_FILE, ScoreResult(error=message).model_dump(exclude_none=True))


def read_job(job_dir: Path) -> ScoreJob:
    """Read and validate `job.json`."""
    path = job_dir / JOB_FILE
    if not path.is_file():
        raise FailedPrecondition(f"{path} is missing: the scorer writes job.json before it launches the worker")
    try:
        return ScoreJob.model_validate_json(path.read_bytes())
    except ValidationError as error:
        raise InvalidArgument(JOB_FILE, describe(error)) from error


def read_action_score_items(job_dir: Path) -> list[ActionScoreItem]:
    """The actions to score, in file order; none when the file is absent."""
    path = job_dir / ACTION_SCORE_ITEMS_FILE
    return read_jsonl(path, ActionScoreItem) if path.is_file() else []


def read_score_items(job_dir: Path) -> list[ScoreItem]:
    """The traces to score as a whole, in file order; none when the file is absent."""
    path = job_dir / SCORE_ITEMS_FILE
    return read_jsonl(path, ScoreItem) if path.is_file() else []
