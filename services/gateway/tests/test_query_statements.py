"""Which SQL the query endpoint accepts: one SELECT of the loaded tables, checked with DuckDB's parser."""

import pytest

from stash_common.errors import InvalidArgument
from stash_gateway.query.statements import check_select


def _refusal(sql: str) -> str:
    with pytest.raises(InvalidArgument) as refused:
        check_select(sql)
    assert refused.value.field == "sql"
    return refused.value.reason


@pytest.mark.parametrize(
    ("sql", "kind"),
    [
        ("CREATE TABLE x (a INTEGER)", "CREATE"),
        ("DROP TABLE steps", "DROP"),
        ("ALTER TABLE steps ADD COLUMN x INTEGER", "ALTER"),
        ("INSERT INTO traces (id) VALUES ('x')", "INSERT"),
        ("UPDATE steps SET content = ''", "UPDATE"),
        ("DELETE FROM annotations", "DELETE"),
        ("PRAGMA version", "PRAGMA"),
        ("ATTACH '/tmp/other.db' AS other", "ATTACH"),
        ("DETACH other", "DETACH"),
        ("COPY steps TO '/tmp/steps.csv'", "COPY"),
        ("INSTALL httpfs", "LOAD"),
        ("LOAD httpfs", "LOAD"),
        ("SET threads = 8", "SET"),
        ("RESET threads", "SET"),
        ("EXPORT DATABASE '/tmp/out'", "EXPORT"),
        ("CALL pragma_version()", "CALL"),
        ("EXPLAIN SELECT 1", "EXPLAIN"),
    ],
)
def test_each_statement_kind_but_select_is_refused_by_name(sql: str, kind: str) -> None:
    assert _refusal(sql) == f"only a SELECT may run; {kind} statements are refused (queries are read-only)"


@pytest.mark.parametrize("sql", ["SELECT 1; SELECT 2", "SELECT 1; DROP TABLE steps"])
def test_more_than_one_statement_is_refused(sql: str) -> None:
    assert _refusal(sql) == "send exactly one SELECT statement, not 2 statements"


def test_no_statement_at_all_is_refused() -> None:
    assert _refusal("-- nothing but a comment") == "send exactly one SELECT statement, not no statement"


def test_a_syntax_error_names_the_parser_error() -> None:
    assert _refusal("SELEC 1").startswith('does not parse: Parser Error: syntax error at or near "SELEC"')


@pytest.mark.parametrize(
    ("sql", "function"),
    [
        ("SELECT * FROM read_csv('/etc/passwd')", "read_csv"),
        ("SELECT * FROM read_parquet('https://example.com/x.parquet')", "read_parquet"),
        ("SELECT * FROM read_json_auto('/etc/hosts')", "read_json_auto"),
        ("SELECT * FROM read_text('/etc/passwd')", "read_text"),
        ("SELECT * FROM glob('/*')", "glob"),
        ("SELECT * FROM query('SELECT 1')", "query"),
        ("SELECT * FROM steps WHERE id IN (SELECT id FROM read_csv('/etc/passwd'))", "read_csv"),
        ("WITH x AS (SELECT * FROM sniff_csv('/etc/passwd')) SELECT * FROM x", "sniff_csv"),
        ("SELECT * FROM steps, LATERAL read_blob(steps.content)", "read_blob"),
    ],
)
def test_table_functions_that_read_outside_the_tables_are_refused(sql: str, function: str) -> None:
    assert _refusal(sql).startswith(f"table function {function}() is refused: a query reads only the tables traces")


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 1",
        "  select count(*) from steps;  ",
        "WITH worst AS (SELECT * FROM action_scores ORDER BY credit LIMIT 5) SELECT * FROM worst",
        "SELECT unnest([1, 2])",
        "FROM steps SELECT role, count(*) GROUP BY ALL",
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3) SELECT * FROM n",
        "DESCRIBE steps",
    ],
)
def test_selects_of_the_loaded_tables_pass(sql: str) -> None:
    check_select(sql)


@pytest.mark.parametrize(
    ("sql", "refused"),
    [
        ("SELECT * FROM pragma_database_list", "table pragma_database_list"),
        ("SELECT * FROM duckdb_settings", "table duckdb_settings"),
        ("SELECT * FROM information_schema.tables", "table information_schema.tables"),
        ("SELECT * FROM main.steps", "table main.steps"),
        ("SELECT * FROM steps JOIN sqlite_master ON true", "table sqlite_master"),
        ("SELECT * FROM range(3)", "table function range()"),
        ("SELECT * FROM duckdb_columns()", "table function duckdb_columns()"),
    ],
)
def test_anything_but_the_documented_tables_is_refused(sql: str, refused: str) -> None:
    assert _refusal(sql) == (
        f"{refused} is refused: a query reads only the tables traces, steps, annotations, scores, action_scores,"
        " step_labels, evaluations, process_patterns (by these names) and its own CTEs"
    )


def test_an_overlong_statement_is_refused() -> None:
    assert _refusal("SELECT " + "1 + " * 30_000 + "1") == "is longer than 100000 characters"
