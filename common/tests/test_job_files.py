"""Job directory files: atomic JSON that refuses NaN, JSONL validated line by line."""

import json
import math
from pathlib import Path

import pytest
from pydantic import BaseModel

from stash_common.errors import InvalidArgument
from stash_common.jobs.files import read_jsonl, write_json, write_jsonl


class _Row(BaseModel):
    name: str


def test_write_json_refuses_nan_and_leaves_no_partial_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="Out of range float"):
        write_jsonl(tmp_path / "scores.jsonl", [{"score": 1.0}, {"score": math.nan}])

    assert list(tmp_path.iterdir()) == []
    write_json(tmp_path / "result.json", {"metrics": {"eval_accuracy": None}})
    assert json.loads((tmp_path / "result.json").read_text()) == {"metrics": {"eval_accuracy": None}}


def test_read_jsonl_skips_blank_lines_and_names_the_line_at_fault(tmp_path: Path) -> None:
    (tmp_path / "rows.jsonl").write_text('{"name": "a"}\n\n{"name": 3}\n')

    with pytest.raises(InvalidArgument, match="^rows.jsonl line 3: name: Input should be a valid string"):
        read_jsonl(tmp_path / "rows.jsonl", _Row)
