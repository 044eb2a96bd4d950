"""What a query may be: exactly one SELECT that reads only the loaded tables, checked with DuckDB's parser.

The statement kind comes from `duckdb.extract_statements`; DDL, DML, PRAGMA, ATTACH, COPY, INSTALL/LOAD,
SET, EXPORT, CALL and every other kind are refused by name. Inside a SELECT, table functions are read from
the parsed tree (`json_serialize_sql`) and only those that read nothing outside the database are allowed:
`read_csv`, `read_parquet`, `query`, `glob` and the rest are refused before anything runs. These checks
give the clear reason; the database's own lockdown (no external access, a locked configuration) is what
makes an escape impossible even if a check missed one.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import duckdb
import orjson

from stash_common.errors import InvalidArgument

TABLE_NAMES = (
    "traces",
    "steps",
    "annotations",
    "scores",
    "action_scores",
    "step_labels",
    "evaluations",
    "process_patterns",
)
# Table functions that compute rows or describe the caller's own database; nothing else reads any data.
ALLOWED_TABLE_FUNCTIONS = frozenset(
    {"range", "generate_series", "unnest", "json_each", "json_tree", "duckdb_tables", "duckdb_columns"}
)
MAX_SQL_CHARS = 100_000


class _Parser:
    """An empty, locked-down DuckDB that only parses (json_serialize_sql runs no statement)."""

    def __init__(self) -> None:
        self.connection = duckdb.connect(":memory:", config={"enable_external_access": False, "threads": 1})
        self.connection.execute("SET lock_configuration = true")
        self.lock = threading.Lock()

    def tree(self, sql: str) -> dict[str, Any]:
        with self.lock:
            row = self.connection.execute("SELECT json_serialize_sql($sql)", {"sql": sql}).fetchone()
        assert row is not None
        tree: dict[str, Any] = orjson.loads(row[0])
        return tree


_parser = _Parser()


def check_select(sql: str) -> None:
    """Refuse (INVALID_ARGUMENT on `sql`, with the reason) anything but one SELECT of the loaded tables."""
    if len(sql) > MAX_SQL_CHARS:
        raise InvalidArgument("sql", f"is longer than {MAX_SQL_CHARS} characters")
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as error:
        raise InvalidArgument("sql", f"does not parse: {error}") from None
    if len(statements) != 1:
        found = "no statement" if not statements else f"{len(statements)} statements"
        raise InvalidArgument("sql", f"send exactly one SELECT statement, not {found}")
    kind = statements[0].type
    if kind != duckdb.StatementType.SELECT:
        raise InvalidArgument(
            "sql", f"only a SELECT may run; {kind.name} statements are refused (queries are read-only)"
        )
    for name in _table_functions(_parser.tree(sql)):
        if name.lower() not in ALLOWED_TABLE_FUNCTIONS:
            raise InvalidArgument(
                "sql",
                f"table function {name}() is refused: a query reads only the loaded tables "
                f"({', '.join(TABLE_NAMES)}); allowed table functions: {', '.join(sorted(ALLOWED_TABLE_FUNCTIONS))}",
            )


def _table_functions(tree: dict[str, Any]) -> Iterator[str]:
    """The names of the table functions anywhere in a parsed statement (subqueries and CTEs included)."""
    if tree.get("error"):
        raise InvalidArgument("sql", f"cannot be checked: {tree.get('error_message', 'unknown parser error')}")
    pending: list[Any] = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            if node.get("type") == "TABLE_FUNCTION":
                yield str(node.get("function", {}).get("function_name", "unknown"))
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
