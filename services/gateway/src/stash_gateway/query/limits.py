"""What one query may take, and how it is stopped: plain values, free of DuckDB and pyarrow.

The gateway's start imports this module (its settings, its `/query` route and the engine need it) but not
DuckDB or pyarrow, which together cost about 0.2 s of its start-up CPU: those load with the first query.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_SQL_CHARS = 100_000


@dataclass(frozen=True)
class QueryLimits:
    """What one query may take: time, rows returned, memory and threads of its database."""

    timeout_s: float = 10.0
    max_rows: int = 1000
    memory_limit_mb: int = 512
    threads: int = 1


class QueryTimeout(Exception):
    """The query ran past its time limit and was interrupted."""
