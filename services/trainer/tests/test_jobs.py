"""Reading a finished training job's scores: every selected trace at the revision the dispatcher read."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from stash_common.errors import InvalidArgument
from stash_trainer.jobs import TRACE_REVISIONS, ActionScore, TrainingScores, read_training_scores


def _job_dir(tmp_path: Path, revisions: dict[str, int], **files: list[dict[str, object]]) -> Path:
    (tmp_path / "job.json").write_bytes(orjson.dumps({"kind": "train", TRACE_REVISIONS: revisions}))
    for name, rows in files.items():
        (tmp_path / f"{name}.jsonl").write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    return tmp_path


def test_every_selected_trace_comes_with_its_revision_and_scores(tmp_path: Path) -> None:
    job_dir = _job_dir(
        tmp_path,
        {"t1": 2, "t2": 5, "t3": 1},
        scores=[{"trace_id": "t1", "score": 0.5}, {"trace_id": "t2", "score": -1.25}],
        action_scores=[
            {"trace_id": "t1", "step_id": "a", "score": 0.25, "credit": 0.1},
            {"trace_id": "t2", "step_id": "c", "score": -2.0, "credit": -0.9},
            {"trace_id": "t1", "step_id": "b", "score": 1.0, "credit": 0.6},
        ],
    )

    assert read_training_scores(job_dir) == [
        TrainingScores("t1", 2, 0.5, (ActionScore("a", 0.25, 0.1), ActionScore("b", 1.0, 0.6))),
        TrainingScores("t2", 5, -1.25, (ActionScore("c", -2.0, -0.9),)),
        TrainingScores("t3", 1, None, ()),
    ]


def test_a_job_that_trained_no_action_pairs_publishes_trace_scores_only(tmp_path: Path) -> None:
    job_dir = _job_dir(tmp_path, {"t1": 4}, scores=[{"trace_id": "t1", "score": 0.5}])

    assert read_training_scores(job_dir) == [TrainingScores("t1", 4, 0.5, ())]


def test_a_malformed_score_line_names_the_file_and_the_line(tmp_path: Path) -> None:
    job_dir = _job_dir(
        tmp_path,
        {"t1": 4},
        action_scores=[
            {"trace_id": "t1", "step_id": "a", "score": 0.25, "credit": 0.1},
            {"trace_id": "t1", "step_id": "b", "score": "high", "credit": 0.1},
        ],
    )

    with pytest.raises(InvalidArgument, match=r"^action_scores.jsonl line 2: score: "):
        read_training_scores(job_dir)
