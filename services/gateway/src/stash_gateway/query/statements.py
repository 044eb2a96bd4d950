"""What a query may be: exactly one SELECT that reads only the loaded tables, checked with DuckDB's parser.

The statement kind comes from `duckdb.extract_statements`; DDL, DML, PRAGMA, ATTACH, COPY, INSTALL/LOAD,
SET, EXPORT, CALL and every other kind are refused by name. Inside a SELECT, what it reads is taken from the
parsed tree (`json_serialize_sql`) and allowed from a list, not refused from one: the documented tables
(TABLE_NAMES) and the query's own CTEs, by their plain names. Every table function is refused (`read_csv`,
`range`, …), and so is any other table name, which also covers the table functions DuckDB lets a query name
without parentheses (`FROM pragma_database_list`). These checks give the clear reason; the database's own
lockdown (no external access, a locked configuration) is what makes an escape impossible even if one missed.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import duckdb
import orjson

from stash_common.errors import InvalidArgument
from stash_gateway.query.limits import MAX_SQL_CHARS

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
    tree = _parser.tree(sql)
    if tree.get("error"):
        raise InvalidArgument("sql", f"cannot be checked: {tree.get('error_message', 'unknown parser error')}")
    allowed = {*TABLE_NAMES, *_cte_names(tree)}
    for source in _sources(tree):
        name = str(source.get("table_name") or "")
        if source["type"] == "TABLE_FUNCTION":
            function = source.get("function", {}).get("function_name", "unknown")
            raise InvalidArgument("sql", f"table function {function}() is refused: {_READABLE}")
        if name.lower() not in allowed or source.get("schema_name") or source.get("catalog_name"):
            qualified = ".".join(part for part in (source.get("catalog_name"), source.get("schema_name"), name) if part)
            raise InvalidArgument("sql", f"table {qualified} is refused: {_READABLE}")


_READABLE = f"a query reads only the tables {', '.join(TABLE_NAMES)} (by these names) and its own CTEs"


def _sources(tree: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every table and table function a parsed statement reads from (subqueries and CTEs included)."""
    for node in _nodes(tree):
        if node.get("type") in ("BASE_TABLE", "TABLE_FUNCTION"):
            yield node


def _cte_names(tree: dict[str, Any]) -> set[str]:
    """The names of the CTEs the statement defines, at any depth."""
    return {str(entry["key"]).lower() for node in _nodes(tree) for entry in node.get("cte_map", {}).get("map", [])}


def _nodes(tree: dict[str, Any]) -> Iterator[dict[str, Any]]:
    pending: list[Any] = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            yield node
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
