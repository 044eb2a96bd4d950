"""The GEPA job's files: the contract between the gepa service and its worker (the spec's file formats).

The service uploads `job.json` and `gepa_examples.jsonl` (`INPUT_FILES`) before it launches the
worker; the worker runs on its own copy, writes `result.json` when it ends, uploads it
(`OUTPUT_FILES`) and reports it to the service, which validates it with `GepaResult`. Run by hand on
a job directory, the worker also keeps `progress.json` (metric calls used). Both sides use these
models, so neither can drift from the other, and the module is free of torch: the service imports
it. Validation errors name the file, the line and the field.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from stash_common.errors import FailedPrecondition, InvalidArgument
from stash_common.jobs.files import describe, read_jsonl, write_json, write_jsonl

JOB_FILE = "job.json"
EXAMPLES_FILE = "gepa_examples.jsonl"
PROGRESS_FILE = "progress.json"
RESULT_FILE = "result.json"
LOG_FILE = "worker.log"
INPUT_FILES = (JOB_FILE, EXAMPLES_FILE)
OUTPUT_FILES = (RESULT_FILE,)
# The spec's skill name: lowercase letters, digits and hyphens, 1 to 64 characters.
SKILL_NAME = re.compile(r"^[a-z0-9-]{1,64}$")
MAX_DESCRIPTION = 1024


class GepaJob(BaseModel):
    """`job.json` of a GEPA job: the spec's keys, then what this deployment adds; unknown keys are ignored."""

    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)

    kind: Literal["gepa"] = "gepa"
    reward_model_key: str = Field(min_length=1)
    task_model: str = Field(min_length=1)
    task_api_base: str | None
    reflection_model: str = Field(min_length=1)
    max_metric_calls: int = Field(ge=1)
    job_id: str = Field(min_length=1)
    reward_model_id: str = Field(min_length=1)
    # Which run the launch works for and where its worker reports (GepaService's address).
    owner_id: str = Field(min_length=1)
    gepa_run_id: str = Field(min_length=1)
    report_address: str = Field(min_length=1)
    # Where the reflection model is served, when the deployment points it somewhere (unset: the provider's).
    reflection_api_base: str | None = None
    validation_trace_ids: list[str] = Field(min_length=1, description="the examples GEPA validates on")
    reflection_minibatch_size: int = Field(default=3, ge=1)
    seed: int = 0
    max_length: int = Field(default=1024, ge=8)
    batch_size: int = Field(default=8, ge=1)
    task_concurrency: int = Field(default=8, ge=1, description="task-model calls in flight at once")


class Message(BaseModel):
    """One input message of an example."""

    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)

    role: Literal["user"]
    content: str


class GepaExample(BaseModel):
    """One line of `gepa_examples.jsonl`: a trace's system prompt, its input, and the feedback on it."""

    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)

    trace_id: str = Field(min_length=1)
    system: str | None
    messages: list[Message] = Field(min_length=1)
    feedback: list[str]


class Candidate(BaseModel):
    """One skill GEPA tried: the full rendered SKILL.md and its validation score."""

    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)

    skill: str = Field(min_length=1)
    score: float = Field(ge=0, le=1, allow_inf_nan=False)


class ExampleFailure(BaseModel):
    """An example whose task-model call failed, with the provider's reason."""

    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)

    trace_id: str = Field(min_length=1)
    error: str = Field(min_length=1)


class Timings(BaseModel):
    """Wall seconds of each part of the run (the benchmark reads them); the task model's calls overlap."""

    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)

    task_model_s: float = Field(ge=0)
    reward_model_s: float = Field(ge=0)
    reflection_s: float = Field(ge=0)
    startup_s: float = Field(0.0, ge=0)  # reading the job, fetching the checkpoint, loading torch and the model
    total_s: float = Field(ge=0)


class GepaResult(BaseModel):
    """`result.json` of a GEPA job: the spec's result keys when it succeeded, else `{"error"}`."""

    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)

    error: str | None = Field(default=None, min_length=1)
    skill_name: str | None = Field(default=None, pattern=SKILL_NAME.pattern)
    skill_description: str | None = Field(default=None, min_length=1, max_length=MAX_DESCRIPTION)
    best_skill: str | None = Field(default=None, min_length=1)
    best_score: float | None = Field(default=None, ge=0, le=1, allow_inf_nan=False)
    seed_skill: str | None = Field(default=None, min_length=1)
    seed_score: float | None = Field(default=None, ge=0, le=1, allow_inf_nan=False)
    candidates: list[Candidate] = Field(default_factory=list)
    example_failures: list[ExampleFailure] = Field(default_factory=list)
    metric_calls: int | None = Field(default=None, ge=0)
    timings: Timings | None = None

    @model_validator(mode="after")
    def _exactly_one_outcome(self) -> GepaResult:
        if self.error is not None:
            return self
        missing = [name for name in _SUCCESS_FIELDS if getattr(self, name) is None]
        if missing:
            raise ValueError(f"a result without `error` needs {', '.join(missing)}")
        if self.best_skill not in {candidate.skill for candidate in self.candidates}:
            raise ValueError("the best skill is not among the candidates")
        return self


_SUCCESS_FIELDS = ("skill_name", "skill_description", "best_skill", "best_score", "seed_skill", "seed_score")


class Progress(BaseModel):
    """`progress.json`: how many metric calls the run has used of its budget."""

    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)

    metric_calls_used: int = Field(ge=0)


def write_job(job_dir: Path, job: GepaJob) -> None:
    """Write `job.json` (the service, before it launches the worker)."""
    write_json(job_dir / JOB_FILE, job.model_dump(mode="json"))


def write_examples(job_dir: Path, examples: Iterable[GepaExample]) -> None:
    """Write `gepa_examples.jsonl`, one example per line."""
    write_jsonl(job_dir / EXAMPLES_FILE, (example.model_dump(mode="json") for example in examples))


def write_progress(job_dir: Path, metric_calls_used: int) -> None:
    """Write `progress.json` (the worker, whenever GEPA spends budget)."""
    write_json(job_dir / PROGRESS_FILE, Progress(metric_calls_used=metric_calls_used).model_dump())


def write_result(job_dir: Path, result: GepaResult) -> None:
    """Write `result.json` (the worker, when it ends)."""
    write_json(job_dir / RESULT_FILE, result.model_dump(mode="json", exclude_none=True))


def read_job(job_dir: Path) -> GepaJob:
    """Read and validate `job.json`."""
    path = job_dir / JOB_FILE
    if not path.is_file():
        raise FailedPrecondition(f"{path} is missing: the gepa service writes job.json before it launches the worker")
    try:
        return GepaJob.model_validate_json(path.read_bytes())
    except ValidationError as error:
        raise InvalidArgument(JOB_FILE, describe(error)) from error


def read_examples(job_dir: Path) -> list[GepaExample]:
    """The examples, in file order."""
    return read_jsonl(job_dir / EXAMPLES_FILE, GepaExample)
