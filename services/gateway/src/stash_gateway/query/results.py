"""Query results as JSON: `{columns: [{name, type}], rows: [[value, …]], truncated}`.

Values JSON carries exactly stay numbers, booleans and strings: integers of up to 32 bits, floats, text.
What a JSON number would round or JSON cannot hold comes back as a string: 64-bit and larger integers
(BIGINT, UBIGINT, HUGEINT; so `count(*)` is a string unless cast to INTEGER), DECIMAL, timestamps, dates
and times (ISO 8601), intervals, UUIDs, NaN and ±Infinity ("NaN", "Infinity", "-Infinity"), and BLOBs
(base64). JSON columns come back as the JSON they hold; lists, arrays, structs and maps become arrays and
objects whose members follow the same rules (map keys as strings).
"""

from __future__ import annotations

import base64
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from duckdb.sqltypes import DuckDBPyType

EXACT_IN_JSON = frozenset(
    {"boolean", "tinyint", "smallint", "integer", "utinyint", "usmallint", "uinteger", "varchar", "enum"}
)
_NOT_FINITE = {math.inf: "Infinity", -math.inf: "-Infinity"}


@dataclass(frozen=True)
class QueryResult:
    """What a query answered: its columns, at most the row cap of its rows, and whether there were more."""

    columns: list[dict[str, str]]
    rows: list[list[Any]]
    truncated: bool

    def as_json(self) -> dict[str, Any]:
        """The response body."""
        return {"columns": self.columns, "rows": self.rows, "truncated": self.truncated}


def query_result(description: Sequence[Sequence[Any]], rows: Sequence[Sequence[Any]], max_rows: int) -> QueryResult:
    """The first `max_rows` of the fetched rows as JSON values, with their columns' names and types."""
    types: list[DuckDBPyType] = [column[1] for column in description]
    return QueryResult(
        columns=[{"name": str(column[0]), "type": str(column[1])} for column in description],
        rows=[[json_value(value, kind) for value, kind in zip(row, types, strict=True)] for row in rows[:max_rows]],
        truncated=len(rows) > max_rows,
    )


def json_value(value: Any, kind: DuckDBPyType) -> Any:
    """One DuckDB value as the JSON value the module docstring describes."""
    if value is None:
        return None
    if str(kind) == "JSON":
        return orjson.loads(value)
    if kind.id in EXACT_IN_JSON:
        return value
    if kind.id in ("float", "double"):
        return value if math.isfinite(value) else _NOT_FINITE.get(value, "NaN")
    if kind.id in ("list", "array"):
        child = _member(kind, 0)
        return [json_value(item, child) for item in value]
    if kind.id == "struct":
        return {name: json_value(value[name], _member(kind, index)) for index, (name, _) in enumerate(kind.children)}
    if kind.id == "map":
        key_type, value_type = _member(kind, 0), _member(kind, 1)
        return {str(json_value(key, key_type)): json_value(item, value_type) for key, item in value.items()}
    if kind.id == "blob":
        return base64.b64encode(value).decode()
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def _member(kind: DuckDBPyType, index: int) -> DuckDBPyType:
    """The type of a nested type's child (a list's items, a struct's field, a map's key or value)."""
    member = kind.children[index][1]
    assert isinstance(member, DuckDBPyType)
    return member
