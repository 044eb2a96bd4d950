"""The job directory contract: validation of job.json and the JSONL inputs, and the result it writes."""

import json
from pathlib import Path

import pytest

from stash_common.errors import FailedPrecondition, InvalidArgument
from stash_trainer.job_contract import (
    TrainJob,
    read_action_score_items,
    read_job,
    read_pairs,
    read_score_items,
    write_result,
)
from stash_trainer.worker.pairs import Pair

JOB = {"kind": "train", "base_model": "all-MiniLM-L6-v2", "epochs": 1, "max_pairs": 4000, "seed": 0}


def _write_job(tmp_path: Path, **changes: object) -> Path:
    (tmp_path / "job.json").write_text(json.dumps({**JOB, **changes}))
    return tmp_path


def test_read_job_fills_defaults_and_ignores_unknown_keys(tmp_path: Path) -> None:
    job = read_job(_write_job(tmp_path, reward_model_id="rm_1"))

    assert job == TrainJob(**JOB, max_length=1024, batch_size=8, learning_rate=1e-4)
    assert job.device == "auto"
    assert read_job(_write_job(tmp_path, device="cpu")).device == "cpu"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"kind": "score"}, "kind: Input should be 'train'"),
        ({"epochs": 0}, "epochs: Input should be greater than or equal to 1"),
        ({"epochs": 1.5}, "epochs: Input should be a valid integer"),
        ({"max_pairs": 1}, "max_pairs: Input should be greater than or equal to 2"),
        ({"base_model": ""}, "base_model: String should have at least 1 character"),
        ({"learning_rate": 0}, "learning_rate: Input should be greater than 0"),
        ({"batch_size": "8"}, "batch_size: Input should be a valid integer"),
        ({"max_length": 4}, "max_length: Input should be greater than or equal to 8"),
        ({"seed": None}, "seed: Input should be a valid integer"),
        ({"device": "tpu"}, "device: Input should be 'auto', 'cpu', 'cuda' or 'mps'"),
    ],
)
def test_read_job_rejects_bad_values_naming_the_field(tmp_path: Path, changes: dict, message: str) -> None:
    with pytest.raises(InvalidArgument, match="^job.json: ") as caught:
        read_job(_write_job(tmp_path, **changes))

    assert message in str(caught.value)


def test_read_job_explains_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FailedPrecondition, match="job.json is missing"):
        read_job(tmp_path)


def test_read_pairs_accepts_either_trace_field_and_ignores_evidence(tmp_path: Path) -> None:
    lines = [
        {"chosen": "a", "rejected": "b", "trace_id": "t1", "granularity": "trace", "evidence": {"quote": "x"}},
        {"chosen": "c", "rejected": "d", "trace_ids": ["t2", "t3", "t2"], "granularity": "action"},
        {"chosen": "e", "rejected": "f", "trace_id": "t4", "granularity": "action", "action_type": "tool_call"},
    ]
    (tmp_path / "pairs.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines) + "\n")

    assert read_pairs(tmp_path) == [
        Pair("a", "b", ("t1",), "trace", None),
        Pair("c", "d", ("t2", "t3"), "action", None),
        Pair("e", "f", ("t4",), "action", "tool_call"),
    ]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ({"chosen": "a", "rejected": "b", "granularity": "trace"}, "needs `trace_id` or a nonempty `trace_ids`"),
        ({"chosen": "a", "rejected": "b", "trace_ids": [], "granularity": "trace"}, "nonempty `trace_ids`"),
        ({"chosen": "a", "rejected": "b", "trace_ids": ["t", ""], "granularity": "trace"}, "empty ids"),
        ({"chosen": "", "rejected": "b", "trace_id": "t", "granularity": "trace"}, "chosen: String should have"),
        ({"chosen": "a", "rejected": "b", "trace_id": "t", "granularity": "step"}, "granularity: Input should be"),
        ({"chosen": "a", "rejected": "b", "trace_id": "t"}, "granularity: Field required"),
        (
            {"chosen": "a", "rejected": "b", "trace_id": "t", "granularity": "action", "action_type": "x"},
            "action_type: Input should be 'response', 'tool_call'",
        ),
    ],
)
def test_read_pairs_names_the_line_and_field_at_fault(tmp_path: Path, line: dict, message: str) -> None:
    good = {"chosen": "a", "rejected": "b", "trace_id": "t", "granularity": "trace"}
    (tmp_path / "pairs.jsonl").write_text(json.dumps(good) + "\n" + json.dumps(line) + "\n")

    with pytest.raises(InvalidArgument, match="^pairs.jsonl line 2: ") as caught:
        read_pairs(tmp_path)

    assert message in str(caught.value)


def test_read_pairs_rejects_a_line_that_is_not_json(tmp_path: Path) -> None:
    (tmp_path / "pairs.jsonl").write_text("{not json\n")

    with pytest.raises(InvalidArgument, match="^pairs.jsonl line 1: .*Invalid JSON"):
        read_pairs(tmp_path)


def test_score_items_are_optional_and_validated(tmp_path: Path) -> None:
    assert read_score_items(tmp_path) == []
    (tmp_path / "action_score_items.jsonl").write_text(json.dumps({"trace_id": "t", "text": "x"}) + "\n")

    with pytest.raises(InvalidArgument, match="action_score_items.jsonl line 1: step_id: Field required"):
        read_action_score_items(tmp_path)


def test_write_result_refuses_metrics_other_than_the_shared_key_set(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="metrics: missing .*seconds.*; unknown loss"):
        write_result(tmp_path, {"train_pairs": 4, "loss": 0.5})

    assert list(tmp_path.iterdir()) == []
