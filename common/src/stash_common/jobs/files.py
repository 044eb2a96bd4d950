"""The files of a job directory: JSONL validated line by line, JSON written atomically, the worker's log.

Every job directory (training, scoring) is a contract between a service and its worker, read by one
process while the other may still be writing: a file appears only once fully written, NaN and
infinity are refused on the way out (JSON has none), and a validation error names the file, the line
and the field so whoever wrote it can fix it. The worker's log lands in the directory too, so a
failed job's reason and its details travel together.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO, TypeVar

from pydantic import BaseModel, ValidationError

from stash_common.errors import InvalidArgument

Record = TypeVar("Record", bound=BaseModel)


def describe(error: ValidationError) -> str:
    """Pydantic's errors as `field: reason` clauses joined by semicolons."""
    return "; ".join(f"{'.'.join(map(str, item['loc'])) or 'record'}: {item['msg']}" for item in error.errors())


def read_jsonl(path: Path, record: type[Record]) -> list[Record]:
    """Validate every line of a JSONL file as `record`; errors name the file and the line."""
    rows = []
    with path.open("rb") as lines:
        for number, line in enumerate(lines, start=1):
            if line.strip():
                try:
                    rows.append(record.model_validate_json(line))
                except ValidationError as error:
                    raise InvalidArgument(f"{path.name} line {number}", describe(error)) from error
    return rows


@contextmanager
def atomic_file(path: Path) -> Iterator[TextIO]:
    """A text file that appears at `path` only once fully written; nothing is left behind on error."""
    temporary = path.with_name(f".{path.name}.tmp")
    try:
        with temporary.open("w") as out:
            yield out
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def write_json(path: Path, value: Mapping[str, Any]) -> None:
    """Write `value` as JSON atomically; NaN and infinity are refused."""
    with atomic_file(path) as out:
        out.write(json.dumps(value, allow_nan=False, indent=2) + "\n")


def write_jsonl(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    """Write one JSON object per line atomically; NaN and infinity are refused."""
    with atomic_file(path) as out:
        for row in rows:
            out.write(json.dumps(row, allow_nan=False) + "\n")


@contextmanager
def job_log(path: Path) -> Iterator[None]:
    """Copy this process's log records (INFO and up) into the file at `path` while the job runs."""
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    previous_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(previous_level)
        handler.close()
