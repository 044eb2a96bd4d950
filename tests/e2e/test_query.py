"""`stash-rm query` against a whole embedded stack: real processes on SQLite, the answer as a table, CSV or JSON."""

from __future__ import annotations

import time

import httpx
import orjson
import pytest

from support.ingest import stash_line
from support.processes import stash_rm
from support.stack import RunningStack

WAIT_S = 30
COUNTS = (
    "SELECT role, count(*)::INTEGER AS steps, max(step_index) AS last FROM steps"
    " WHERE trace_id IN (SELECT id FROM traces WHERE external_id = 'cli-1') GROUP BY role ORDER BY role"
)


@pytest.fixture(scope="module")
def stack(embedded_stack: RunningStack) -> RunningStack:
    return embedded_stack.for_module("query")


@pytest.fixture(scope="module")
def key(stack: RunningStack, alice: httpx.Client) -> str:
    """Alice's key, once her trace is imported and labeled."""
    imported = alice.post("/traces/import", json={"format": "stash", "data": stash_line("cli-1")})
    assert imported.status_code == 200, imported.text
    deadline = time.monotonic() + WAIT_S
    sql = {"sql": "SELECT count(*)::INTEGER FROM evaluations WHERE status = 'succeeded'"}
    while alice.post("/query", json=sql).json()["rows"] != [[1]]:
        assert time.monotonic() < deadline, "the trace was not evaluated in time"
        time.sleep(0.2)
    return str(alice.headers["Authorization"].removeprefix("Bearer "))


def _query(stack: RunningStack, key: str, *args: str) -> tuple[int, str, str]:
    result = stash_rm("query", *args, env={**stack.env, "STASH_API_KEY": key, "STASH_URL": stack.gateway_url})
    return result.returncode, result.stdout, result.stderr


def test_query_prints_a_table_with_each_columns_type(stack: RunningStack, key: str) -> None:
    code, out, _ = _query(stack, key, COUNTS)

    assert code == 0
    assert "role" in out and "VARCHAR" in out and "INTEGER" in out
    cells = [[cell.strip() for cell in line.split("│")[1:-1]] for line in out.splitlines() if line.startswith("│")]
    assert ["assistant", "2", "4"] in cells and ["user", "1", "1"] in cells


def test_query_prints_csv_and_json_for_scripts(stack: RunningStack, key: str) -> None:
    _, csv_out, _ = _query(stack, key, COUNTS, "--format", "csv")
    _, json_out, _ = _query(stack, key, COUNTS, "--format", "json")

    assert csv_out == "role,steps,last\nassistant,2,4\nsystem,1,0\ntool,1,3\nuser,1,1\n"
    answer = orjson.loads(json_out)
    assert answer["rows"] == [["assistant", 2, 4], ["system", 1, 0], ["tool", 1, 3], ["user", 1, 1]]
    assert answer["truncated"] is False


def test_a_refused_query_is_one_line_naming_why(stack: RunningStack, key: str) -> None:
    code, _, err = _query(stack, key, "DELETE FROM steps")

    assert code == 1
    assert "HTTP 422: sql: only a SELECT may run; DELETE statements are refused" in err
    assert "Traceback" not in err


def test_a_truncated_answer_says_so(stack: RunningStack, key: str) -> None:
    numbers = "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 1199) SELECT i FROM n"
    code, out, err = _query(stack, key, numbers, "--format", "csv")

    assert code == 0 and len(out.splitlines()) == 1001
    assert "only the first 1000 rows are shown" in err
