"""One owner's locked-down DuckDB: loads Arrow tables, answers JSON, stops runaway queries, lets nothing out."""

from collections.abc import Iterator
from datetime import UTC, datetime

import pyarrow as pa
import pytest

from stash_common.errors import InvalidArgument, ResourceExhausted
from stash_gateway.query.database import OwnerDatabase
from stash_gateway.query.limits import QueryLimits, QueryTimeout

STEPS = pa.table(
    {
        "id": ["s1", "s2", "s3"],
        "step_index": pa.array([0, 1, 2], type=pa.int32()),
        "metadata": pa.array(['{"label": {"type": "lookup"}}', "{}", None], type=pa.json_()),
        "created_at": pa.array([datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)] * 3, type=pa.timestamp("us", tz="UTC")),
    }
)


@pytest.fixture
def database() -> Iterator[OwnerDatabase]:
    database = OwnerDatabase(QueryLimits(timeout_s=0.5, max_rows=10, memory_limit_mb=64))
    database.replace_tables({"steps": STEPS})
    yield database
    database.connection.close()


def _refusal(database: OwnerDatabase, sql: str) -> str:
    with pytest.raises(InvalidArgument) as refused:
        database.run(sql)
    return refused.value.reason


def test_loaded_tables_keep_their_types_and_come_back_as_json(database: OwnerDatabase) -> None:
    result = database.run("SELECT id, step_index, metadata, created_at FROM steps ORDER BY step_index")

    assert result.columns == [
        {"name": "id", "type": "VARCHAR"},
        {"name": "step_index", "type": "INTEGER"},
        {"name": "metadata", "type": "JSON"},
        {"name": "created_at", "type": "TIMESTAMP WITH TIME ZONE"},
    ]
    assert result.rows[0] == ["s1", 0, {"label": {"type": "lookup"}}, "2025-01-02T03:04:05+00:00"]
    assert result.rows[2][2] is None
    assert result.truncated is False


def test_json_columns_can_be_queried_with_json_operators(database: OwnerDatabase) -> None:
    result = database.run("SELECT metadata->'label'->>'type' AS kind FROM steps WHERE step_index = 0")

    assert result.rows == [["lookup"]]


def test_types_json_cannot_carry_exactly_come_back_as_strings(database: OwnerDatabase) -> None:
    result = database.run(
        "SELECT count(*) AS n, 9007199254740993::BIGINT AS big, 2.50::DECIMAL(5, 2) AS money, 'nan'::DOUBLE AS nan,"
        " 'infinity'::DOUBLE AS inf, 1.5::DOUBLE AS x, DATE '2025-01-02' AS day, INTERVAL 90 MINUTE AS pause,"
        " '\\x01\\x02'::BLOB AS raw, [1::BIGINT, 2] AS big_list, {'k': 3::HUGEINT, 'v': 4} AS pair, true AS yes"
        " FROM steps"
    )

    assert [column["type"] for column in result.columns][:2] == ["BIGINT", "BIGINT"]
    assert result.rows == [
        ["3", "9007199254740993", "2.50", "NaN", "Infinity", 1.5, "2025-01-02", "1:30:00", "AQI=", ["1", "2"],
         {"k": "3", "v": 4}, True]
    ]  # fmt: skip


def test_results_stop_at_the_row_cap(database: OwnerDatabase) -> None:
    capped = database.run("SELECT range::INTEGER AS n FROM range(25)")
    exact = database.run("SELECT range::INTEGER AS n FROM range(10)")

    assert (len(capped.rows), capped.truncated) == (10, True)
    assert capped.rows[:3] == [[0], [1], [2]]
    assert (len(exact.rows), exact.truncated) == (10, False)


def test_a_runaway_query_is_interrupted_and_the_database_still_answers(database: OwnerDatabase) -> None:
    with pytest.raises(QueryTimeout) as stopped:
        database.run("SELECT count(*) FROM generate_series(1, 1000000000000) a, generate_series(1, 10000) b")

    assert str(stopped.value) == "the query ran past the 0.5-second limit and was stopped"
    assert database.run("SELECT count(*)::INTEGER FROM steps").rows == [[3]]


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("SELECT * FROM read_csv('/etc/passwd')", "file system operations are disabled by configuration"),
        ("SELECT * FROM read_parquet('https://example.com/x.parquet')", "disabled by configuration"),
        ("INSTALL httpfs", "disabled by configuration"),
        ("LOAD httpfs", "Loading external extensions is disabled through configuration"),
        ("SET enable_external_access = true", "the configuration has been locked"),
        ("SET memory_limit = '100GB'", "the configuration has been locked"),
        ("SET threads = 16", "the configuration has been locked"),
        ("SELECT * FROM STEPS_BY_PYTHON_NAME", "Table with name STEPS_BY_PYTHON_NAME does not exist"),
    ],
)
def test_the_database_itself_lets_nothing_out_even_unchecked(database: OwnerDatabase, sql: str, reason: str) -> None:
    STEPS_BY_PYTHON_NAME = STEPS  # noqa: F841  a Python variable a replacement scan would find
    assert reason in _refusal(database, sql)


def test_its_limits_are_those_it_was_given(database: OwnerDatabase) -> None:
    settings = database.run("SELECT current_setting('threads')::INTEGER, current_setting('memory_limit')")

    assert settings.rows == [[1, "61.0 MiB"]]


def test_a_query_beyond_the_memory_limit_is_refused_with_the_limit(database: OwnerDatabase) -> None:
    reason = _refusal(database, "SELECT list(repeat('x', 1000)) FROM range(1000000)")

    assert reason == "the query needs more than the 64 MB memory limit"


def test_tables_beyond_the_memory_limit_are_refused() -> None:
    database = OwnerDatabase(QueryLimits(memory_limit_mb=16))
    big = pa.table({"content": ["x" * 1000] * 100_000})

    with pytest.raises(ResourceExhausted) as refused:
        database.replace_tables({"steps": big})

    assert str(refused.value) == "your steps table does not fit the query memory limit (16 MB)"


def test_replacing_a_table_replaces_its_rows(database: OwnerDatabase) -> None:
    database.replace_tables({"steps": STEPS.slice(0, 1)})

    assert database.run("SELECT id FROM steps").rows == [["s1"]]
