"""Reading a finished training job's scores by its key: every selected trace at the revision the trainer read."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from stash_common.errors import InvalidArgument, NotFound
from stash_common.jobs.training_scores import (
    TRACE_REVISIONS,
    ActionScore,
    TrainingJobScores,
    TrainingScores,
    read_training_scores,
)
from stash_common.storage import LocalObjectStore

KEY = "jobs/trainer/job-1"


@pytest.fixture
def objects(tmp_path: Path) -> LocalObjectStore:
    return LocalObjectStore(tmp_path / "objects", "http://127.0.0.1:1", b"k" * 32)


def _store_job(objects: LocalObjectStore, revisions: dict[str, int], **files: list[dict[str, object]]) -> None:
    job = {"kind": "train", "owner_id": "owner", "reward_model_id": "m1", TRACE_REVISIONS: revisions}
    objects.put(f"{KEY}/job.json", orjson.dumps(job))
    for name, rows in files.items():
        objects.put(f"{KEY}/{name}.jsonl", b"".join(orjson.dumps(row) + b"\n" for row in rows))


def test_every_selected_trace_comes_with_its_revision_and_scores(objects: LocalObjectStore) -> None:
    _store_job(
        objects,
        {"t1": 2, "t2": 5, "t3": 1},
        scores=[{"trace_id": "t1", "score": 0.5}, {"trace_id": "t2", "score": -1.25}],
        action_scores=[
            {"trace_id": "t1", "step_id": "a", "score": 0.25, "credit": 0.1},
            {"trace_id": "t2", "step_id": "c", "score": -2.0, "credit": -0.9},
            {"trace_id": "t1", "step_id": "b", "score": 1.0, "credit": 0.6},
        ],
    )

    assert read_training_scores(objects, KEY) == TrainingJobScores(
        "owner",
        "m1",
        (
            TrainingScores("t1", 2, 0.5, (ActionScore("a", 0.25, 0.1), ActionScore("b", 1.0, 0.6))),
            TrainingScores("t2", 5, -1.25, (ActionScore("c", -2.0, -0.9),)),
            TrainingScores("t3", 1, None, ()),
        ),
    )


def test_a_job_that_trained_no_action_pairs_publishes_trace_scores_only(objects: LocalObjectStore) -> None:
    _store_job(objects, {"t1": 4}, scores=[{"trace_id": "t1", "score": 0.5}])

    assert read_training_scores(objects, KEY).traces == (TrainingScores("t1", 4, 0.5, ()),)


def test_a_malformed_score_line_names_the_file_and_the_line(objects: LocalObjectStore) -> None:
    _store_job(
        objects,
        {"t1": 4},
        action_scores=[
            {"trace_id": "t1", "step_id": "a", "score": 0.25, "credit": 0.1},
            {"trace_id": "t1", "step_id": "b", "score": "high", "credit": 0.1},
        ],
    )

    with pytest.raises(InvalidArgument, match=r"^action_scores.jsonl line 2: score: "):
        read_training_scores(objects, KEY)


def test_a_job_whose_files_are_gone_is_not_found(objects: LocalObjectStore) -> None:
    with pytest.raises(NotFound, match="training job jobs/trainer/job-1 has no job.json"):
        read_training_scores(objects, KEY)


@pytest.mark.parametrize("key", ["", "jobs/scorer/job-1", "jobs/trainer/", "jobs/trainer/a/../b", "reward-models/x"])
def test_only_a_training_jobs_key_is_read(objects: LocalObjectStore, key: str) -> None:
    with pytest.raises(InvalidArgument, match="job_key: must be a training job's key, jobs/trainer/<job id>"):
        read_training_scores(objects, key)
