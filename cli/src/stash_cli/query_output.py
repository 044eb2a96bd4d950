"""How `stash-rm query` prints an answer of POST /query: a table for people, CSV or JSON for scripts."""

from __future__ import annotations

import csv
import io
from typing import Any, Literal

import orjson
from rich.table import Table

OutputFormat = Literal["table", "csv", "json"]


def cell(value: Any) -> str:
    """One value as text: nested values as JSON, null as an empty cell."""
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return orjson.dumps(value).decode()
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def as_table(answer: dict[str, Any]) -> Table:
    """The rows under their column names, each header with its DuckDB type."""
    table = Table(*(f"{column['name']}\n[dim]{column['type']}[/dim]" for column in answer["columns"]))
    for row in answer["rows"]:
        table.add_row(*(cell(value) for value in row))
    return table


def as_csv(answer: dict[str, Any]) -> str:
    """A header of column names, then one line per row."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([column["name"] for column in answer["columns"]])
    writer.writerows([cell(value) for value in row] for row in answer["rows"])
    return out.getvalue()


def as_json(answer: dict[str, Any]) -> str:
    """The gateway's answer as it came: `{columns, rows, truncated}`."""
    return orjson.dumps(answer).decode()
