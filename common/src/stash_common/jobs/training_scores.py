"""The scores a training job leaves in object storage, read by the service that consumes them (the scorer).

A training worker scores the selected traces with the checkpoint it trained and uploads
`scores.jsonl` (a trace's raw reward) and `action_scores.jsonl` (each action's reward and credit)
beside the job's inputs, under the job's key; the trainer's `job.json` there names the owner, the
model and the revision of each selected trace it read (`trace_revisions`). The consumer reads them
by the job's key, so no service relays another job's files over gRPC. Plain Python, no gRPC.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field

from stash_common.errors import InvalidArgument, NotFound
from stash_common.jobs.files import read_jsonl
from stash_common.jobs.transfer import download_files, job_key
from stash_common.storage import ObjectStore

SERVICE = "trainer"  # training jobs' files live under jobs/trainer/<job id>
JOB_FILE = "job.json"
SCORES_FILE = "scores.jsonl"
ACTION_SCORES_FILE = "action_scores.jsonl"
TRACE_REVISIONS = "trace_revisions"  # the key of job.json keeping each selected trace's revision as read
Row = TypeVar("Row", bound=BaseModel)


@dataclass(frozen=True)
class ActionScore:
    """The raw reward and display credit a training job computed for one action."""

    step_id: str
    score: float
    credit: float


@dataclass(frozen=True)
class TrainingScores:
    """What a training job computed for one selected trace, at the revision the trainer read."""

    trace_id: str
    trace_revision: int
    trace_score: float | None
    actions: tuple[ActionScore, ...]


@dataclass(frozen=True)
class TrainingJobScores:
    """A training job's scores and whose they are."""

    owner_id: str
    reward_model_id: str
    traces: tuple[TrainingScores, ...]


class TrainingJobFile(BaseModel):
    """What the consumer reads of the trainer's `job.json` (the worker's own keys are ignored)."""

    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)

    owner_id: str = Field(min_length=1)
    reward_model_id: str = Field(min_length=1)
    trace_revisions: dict[str, int]  # TRACE_REVISIONS


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


def training_job_id(key: str) -> str:
    """The job id of a training job's key `jobs/trainer/<job id>`; InvalidArgument for any other key."""
    prefix = job_key(SERVICE, "")
    job_id = key.removeprefix(prefix)
    if not key.startswith(prefix) or not job_id or "/" in job_id:
        raise InvalidArgument("job_key", f"must be a training job's key, {prefix}<job id>")
    return job_id


def read_training_scores(objects: ObjectStore, key: str) -> TrainingJobScores:
    """The scores stored under training job `key`, at the revisions its job.json keeps.

    A trace the worker scored nothing of (an empty transcript, no action pairs trained) comes with its
    revision and no scores; a score file the worker did not write is no scores. NotFound when the
    job's job.json is gone; InvalidArgument naming the file, line and field when a file is malformed.
    """
    training_job_id(key)
    with tempfile.TemporaryDirectory(prefix="stash-training-scores-") as scratch:
        folder = Path(scratch)
        found = download_files(objects, key, folder, (JOB_FILE, SCORES_FILE, ACTION_SCORES_FILE))
        if JOB_FILE not in found:
            raise NotFound(f"training job {key} has no {JOB_FILE} in object storage")
        job = TrainingJobFile.model_validate_json((folder / JOB_FILE).read_bytes())
        trace_scores = {row.trace_id: row.score for row in _rows(folder / SCORES_FILE, _TraceScoreRow)}
        actions: dict[str, list[ActionScore]] = {}
        for row in _rows(folder / ACTION_SCORES_FILE, _ActionScoreRow):
            actions.setdefault(row.trace_id, []).append(ActionScore(row.step_id, row.score, row.credit))
    traces = tuple(
        TrainingScores(trace_id, revision, trace_scores.get(trace_id), tuple(actions.get(trace_id, ())))
        for trace_id, revision in job.trace_revisions.items()
    )
    return TrainingJobScores(job.owner_id, job.reward_model_id, traces)


def training_checkpoint(objects: ObjectStore, key: str) -> str | None:
    """The checkpoint archive key that training job `key`'s `job.json` names (`archive_key`); None once the
    job's files are gone."""
    training_job_id(key)
    with tempfile.TemporaryDirectory(prefix="stash-training-job-") as scratch:
        folder = Path(scratch)
        if JOB_FILE not in download_files(objects, key, folder, (JOB_FILE,)):
            return None
        return _CheckpointFile.model_validate_json((folder / JOB_FILE).read_bytes()).archive_key


class _CheckpointFile(BaseModel):
    """The key of the trainer's `job.json` naming where the worker stores the checkpoint archive."""

    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)

    archive_key: str = Field(min_length=1)


def _rows(path: Path, record: type[Row]) -> list[Row]:
    return read_jsonl(path, record) if path.is_file() else []
