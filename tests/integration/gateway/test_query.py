"""POST /query on the gateway app, against real ingest, labeler, trainer and scorer servicers on PostgreSQL.

Two users import traces with the same external ids (and the same Claude Code session); each sees only
their own rows in every table. The scorer's jobs run the fake worker, which scores action k of a trace
0.5·(k + 1), so the numbers of the join below are known.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from stash_common.settings import load
from stash_gateway.app import create_app
from stash_gateway.query.statements import TABLE_NAMES
from stash_gateway.settings import GatewaySettings
from support.backend import Backend, serve_backend
from support.claude_code import looping_test_session
from support.ingest import stash_line
from support.scorer import finished_run, wait_until

TIMEOUT_S = 1.0


@pytest.fixture(scope="module")
def backend(module_postgres_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    with serve_backend(module_postgres_url, tmp_path_factory.mktemp("scoring-jobs")) as running:
        yield running


@pytest.fixture(scope="module")
def gateway(backend: Backend, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    settings = load(
        GatewaySettings,
        data_dir=tmp_path_factory.mktemp("gateway"),
        query_timeout_s=TIMEOUT_S,
        **backend.gateway_settings,
    )
    with TestClient(create_app(settings)) as client:
        yield client


class User:
    """A signed-in caller of the gateway app."""

    def __init__(self, gateway: TestClient, backend: Backend, name: str) -> None:
        self.id, key = backend.user(name)
        self.gateway = gateway
        self.headers = {"Authorization": f"Bearer {key}"}
        self.traces: dict[str, str] = {}  # external id → trace id

    def call(self, method: str, path: str, expected: int = 200, **kwargs: Any) -> Any:
        response = self.gateway.request(method, f"/api/v1/rm{path}", headers=self.headers, **kwargs)
        assert response.status_code == expected, response.text
        return response.json() if response.content else None

    def imported(self, data: str, format_name: str, external_id: str, **body: Any) -> str:
        answer = self.call("POST", "/traces/import", json={"format": format_name, "data": data, **body})
        self.traces[external_id] = answer["trace_ids"][0]
        return self.traces[external_id]

    def annotate(self, external_id: str, step: int, **body: Any) -> dict[str, Any]:
        trace_id = self.traces[external_id]
        step_id = self.call("GET", f"/traces/{trace_id}")["steps"][step]["id"]
        return self.call("POST", f"/traces/{trace_id}/annotations", 201, json={"step_id": step_id, **body})

    def query(self, sql: str, expected: int = 200) -> Any:
        return self.call("POST", "/query", expected, json={"sql": sql})

    def rows(self, sql: str) -> list[list[Any]]:
        return list(self.query(sql)["rows"])

    def scored(self, backend: Backend, external_ids: list[str]) -> None:
        model_id = backend.trainer.add_model(self.id)
        for external_id in external_ids:
            body = {"reward_model_id": model_id}
            run = self.call("POST", f"/traces/{self.traces[external_id]}/score", 202, json=body)
            assert finished_run(backend.scorer.stub, self.id, run["id"]).error == ""

    def evaluated(self) -> None:
        """Wait until every trace of the caller has a succeeded evaluation."""
        sql = "SELECT count(DISTINCT trace_id)::INTEGER FROM evaluations WHERE status = 'succeeded'"
        wait_until(lambda: self.rows(sql) == [[len(self.traces)]], what="every trace evaluated")


@pytest.fixture(scope="module")
def alice(gateway: TestClient, backend: Backend) -> User:
    alice = User(gateway, backend, "alice")
    shared = "\n".join([stash_line("shared-1"), stash_line("shared-2")])
    answer = alice.call("POST", "/traces/import", json={"format": "stash", "data": shared, "source_id": "support-bot"})
    alice.traces.update(zip(["shared-1", "shared-2"], answer["trace_ids"], strict=True))
    alice.imported(looping_test_session(), "claude_code", "session")
    alice.annotate("shared-1", 2, rating=1)
    alice.annotate("shared-1", 4, rating=-1, comment="that refund was wrong")
    alice.annotate("shared-2", 4, rating=1)
    alice.scored(backend, ["shared-1", "shared-2"])
    alice.evaluated()
    return alice


@pytest.fixture(scope="module")
def bob(gateway: TestClient, backend: Backend) -> User:
    bob = User(gateway, backend, "bob")
    bob.imported(stash_line("shared-1"), "stash", "shared-1")
    bob.imported(looping_test_session(), "claude_code", "session")
    bob.annotate("shared-1", 4, rating=1)
    bob.scored(backend, ["shared-1"])
    bob.evaluated()
    return bob


# Each table's column naming the trace a row belongs to.
TRACE_COLUMN = {name: "trace_id" for name in TABLE_NAMES} | {"traces": "id"}


@pytest.mark.parametrize("table", TABLE_NAMES)
def test_every_table_holds_the_callers_rows_and_only_those(alice: User, bob: User, table: str) -> None:
    sql = f"SELECT DISTINCT {TRACE_COLUMN[table]} FROM {table}"

    alices = {row[0] for row in alice.rows(sql)}
    bobs = {row[0] for row in bob.rows(sql)}

    assert alices and alices <= set(alice.traces.values())
    assert bobs and bobs <= set(bob.traces.values())


def test_the_same_external_ids_are_two_users_different_traces(alice: User, bob: User) -> None:
    sql = "SELECT id, external_id, step_count FROM traces"

    alices = {row[0]: row[1] for row in alice.rows(sql)}
    bobs = {row[0]: row[1] for row in bob.rows(sql)}

    assert set(alices) == set(alice.traces.values()) and set(bobs) == set(bob.traces.values())
    assert set(bobs.values()) < set(alices.values())
    assert not set(alices) & set(bobs)


def test_row_counts_follow_what_each_user_stored(alice: User, bob: User) -> None:
    sql = (
        "SELECT (SELECT sum(step_count) FROM traces)::INTEGER, (SELECT count(*) FROM steps)::INTEGER,"
        " (SELECT count(*) FROM annotations)::INTEGER, (SELECT count(*) FROM process_patterns)::INTEGER"
    )

    steps = 5 * 2 + alice.rows("SELECT step_count FROM traces WHERE source_format = 'claude_code'")[0][0]
    assert alice.rows(sql) == [[steps, steps, 3, 3]]
    assert bob.rows(sql) == [[steps - 5, steps - 5, 1, 3]]


# Steps 2 (the lookup call, action 0) and 4 (the answer, action 1) of both shared traces are scored 0.5 and 1.0;
# alice rated step 2 of shared-1 +1, and step 4 −1 on shared-1 and +1 on shared-2.
JOIN = """
SELECT s.step_index, a.score, count(DISTINCT a.step_id)::INTEGER AS actions, count(an.id)::INTEGER AS annotations,
       coalesce(sum(an.rating), 0)::INTEGER AS rating, count(an.comment)::INTEGER AS comments
FROM steps s
JOIN traces t ON t.id = s.trace_id
JOIN action_scores a ON a.step_id = s.id
LEFT JOIN annotations an ON an.step_id = s.id
WHERE t.external_id LIKE 'shared-%'
GROUP BY ALL
ORDER BY s.step_index
"""


def test_a_join_across_steps_annotations_and_action_scores_gives_the_known_numbers(alice: User, bob: User) -> None:
    assert alice.rows(JOIN) == [[2, 0.5, 2, 1, 1, 0], [4, 1.0, 2, 2, 0, 1]]
    assert bob.rows(JOIN) == [[2, 0.5, 1, 0, 0, 0], [4, 1.0, 1, 1, 1, 0]]


def test_the_documented_queries_answer(alice: User) -> None:
    page = (Path(__file__).resolve().parents[3] / "docs" / "querying.md").read_text(encoding="utf-8")
    section = page.split("\n## Queries to start from", 1)[1].split("\n## ", 1)[0]

    worst, labels, patterns = (alice.query(sql) for sql in re.findall(r"```sql\n(.*?)```", section, re.S))

    score = [column["name"] for column in worst["columns"]].index("score")
    assert [row[score] for row in worst["rows"]] == [0.5, 0.5, 1.0, 1.0]
    assert labels["rows"] == [["answer", 1, 1, 1], ["lookup", 1, 0, 0]]
    assert [row[0] for row in patterns["rows"]] == ["stuck_on_test", "ping_pong", "repetition_loop"]


FORBIDDEN = [
    ("CREATE TABLE stolen AS SELECT * FROM steps", "CREATE statements are refused"),
    ("DROP TABLE annotations", "DROP statements are refused"),
    ("INSERT INTO annotations (id) VALUES ('x')", "INSERT statements are refused"),
    ("UPDATE steps SET content = ''", "UPDATE statements are refused"),
    ("DELETE FROM traces", "DELETE statements are refused"),
    ("ALTER TABLE steps RENAME TO gone", "ALTER statements are refused"),
    ("PRAGMA database_list", "PRAGMA statements are refused"),
    ("ATTACH ':memory:' AS other", "ATTACH statements are refused"),
    ("COPY steps TO '/tmp/steps.csv'", "COPY statements are refused"),
    ("INSTALL httpfs", "LOAD statements are refused"),
    ("LOAD httpfs", "LOAD statements are refused"),
    ("SET enable_external_access = true", "SET statements are refused"),
    ("EXPORT DATABASE '/tmp/everything'", "EXPORT statements are refused"),
    ("CALL pragma_version()", "CALL statements are refused"),
    ("SELECT 1; DELETE FROM steps", "send exactly one SELECT statement, not 2 statements"),
    ("SELECT * FROM read_csv('/etc/passwd')", "table function read_csv() is refused"),
    ("SELECT * FROM read_parquet('https://example.com/steps.parquet')", "table function read_parquet() is refused"),
    ("SELECT * FROM query('SELECT * FROM steps')", "table function query() is refused"),
    ("SELECT * FROM '/etc/passwd'", "table /etc/passwd is refused"),
    ("SELECT * FROM pragma_database_list", "table pragma_database_list is refused"),
]
TOUCHED = (
    "SELECT (SELECT count(*) FROM traces)::INTEGER, (SELECT count(*) FROM steps)::INTEGER,"
    " (SELECT count(*) FROM annotations)::INTEGER, (SELECT count(*) FROM traces)::INTEGER"
)


@pytest.mark.parametrize(("sql", "reason"), FORBIDDEN)
def test_forbidden_statements_and_escapes_get_422_naming_why_and_touch_nothing(
    alice: User, sql: str, reason: str
) -> None:
    before = alice.rows(TOUCHED)

    refused = alice.query(sql, 422)

    assert refused["field"] == "sql" and reason in refused["detail"], refused
    assert alice.rows(TOUCHED) == before


# 0 … last, without a table function (every one is refused).
_NUMBERS = "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < {last}) SELECT i::INTEGER FROM n"


def test_results_are_capped_at_1000_rows(alice: User) -> None:
    capped = alice.query(_NUMBERS.format(last=1499))
    whole = alice.query(_NUMBERS.format(last=999))

    assert (len(capped["rows"]), capped["truncated"], capped["rows"][-1]) == (1000, True, [999])
    assert (len(whole["rows"]), whole["truncated"]) == (1000, False)


def test_a_runaway_query_is_stopped_with_408_and_the_next_query_runs(alice: User) -> None:
    runaway = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n"

    stopped = alice.query(runaway, 408)

    assert stopped == {"detail": f"the query ran past the {TIMEOUT_S:g}-second limit and was stopped"}
    assert alice.rows("SELECT 42") == [[42]]


def test_columns_json_cannot_carry_exactly_are_strings(alice: User) -> None:
    result = alice.query("SELECT count(*) AS n, min(created_at) AS first, avg(step_count) AS mean FROM traces")

    assert [column["type"] for column in result["columns"]] == ["BIGINT", "TIMESTAMP WITH TIME ZONE", "DOUBLE"]
    count, first, mean = result["rows"][0]
    assert count == "3" and isinstance(mean, float)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+\+00:00", first)


def _loads(user: User) -> dict[str, float]:
    text = user.gateway.get("/metrics").text
    return {
        source: float(value) for source, value in re.findall(r'stash_query_loads_total\{source="(\w+)"\} (\S+)', text)
    }


def test_warm_tables_are_reused_until_the_callers_rows_change(gateway: TestClient, backend: Backend) -> None:
    carol = User(gateway, backend, "carol")
    carol.imported(stash_line("carol-1"), "stash", "carol-1")
    carol.evaluated()
    annotations = "SELECT count(*)::INTEGER FROM annotations"
    assert carol.rows(annotations) == [[0]]
    warm = _loads(carol)

    assert carol.rows(annotations) == [[0]]
    assert _loads(carol) == warm

    created = carol.annotate("carol-1", 4, rating=1)
    assert carol.rows(annotations) == [[1]]
    after_insert = _loads(carol)
    carol.call("PATCH", f"/annotations/{created['id']}", json={"rating": -1})
    assert carol.rows("SELECT rating FROM annotations") == [[-1]]
    carol.call("DELETE", f"/annotations/{created['id']}", 204)
    assert carol.rows(annotations) == [[0]]

    assert after_insert == warm | {"ingest": warm["ingest"] + 1}
    assert _loads(carol) == warm | {"ingest": warm["ingest"] + 3}


def test_a_query_needs_a_key(gateway: TestClient) -> None:
    response = gateway.post("/api/v1/rm/query", json={"sql": "SELECT 1"})

    assert response.status_code == 401
