"""One owner's tables in an in-memory DuckDB of their own, and a query on it under a time limit.

The database is locked down when it is created: no external access (files, URLs, httpfs), no extension
installing or loading, no Python replacement scans, no spilling to disk, then `lock_configuration`, so no
statement can change any of that. Its memory limit (tables and queries together) and thread count bound
what one owner's queries can take from the gateway. Tables
arrive as Arrow tables from the gateway itself, which DuckDB copies in, replacing a service's tables
whole when their rows changed.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

import duckdb
import pyarrow as pa

from stash_common.errors import InvalidArgument, ResourceExhausted
from stash_gateway.query.limits import QueryLimits, QueryTimeout
from stash_gateway.query.results import QueryResult, query_result


class OwnerDatabase:
    """An owner's locked-down in-memory DuckDB; the caller serialises its loads and queries with `lock`."""

    def __init__(self, limits: QueryLimits) -> None:
        self.limits = limits
        self.lock = threading.Lock()
        self.connection = duckdb.connect(
            ":memory:",
            config={
                "threads": limits.threads,
                "memory_limit": f"{limits.memory_limit_mb}MB",
                "enable_external_access": False,
                "autoinstall_known_extensions": False,
                "autoload_known_extensions": False,
                "allow_community_extensions": False,
                "python_enable_replacements": False,
                # No spilling to disk: the memory limit bounds the tables and the queries together.
                "temp_directory": "",
            },
        )
        self.connection.execute("SET TimeZone = 'UTC'")
        self.connection.execute("SET lock_configuration = true")

    def replace_tables(self, tables: Mapping[str, pa.Table]) -> None:
        """Make each named table exactly these rows (columns and types from the Arrow schema)."""
        with self.connection.cursor() as cursor:
            for name, table in tables.items():
                cursor.register("_incoming", table)
                try:
                    cursor.execute(f'CREATE OR REPLACE TABLE "{name}" AS SELECT * FROM _incoming').fetchall()
                except duckdb.OutOfMemoryException:
                    raise ResourceExhausted(
                        f"your {name} table does not fit the query memory limit ({self.limits.memory_limit_mb} MB)"
                    ) from None
                finally:
                    cursor.unregister("_incoming")

    def memory_bytes(self) -> int:
        """How much memory the database holds now (its tables, mostly)."""
        with self.connection.cursor() as cursor:
            rows = cursor.execute("SELECT sum(memory_usage_bytes) FROM duckdb_memory()").fetchall()
        return int(rows[0][0] or 0)

    def run(self, sql: str) -> QueryResult:
        """The query's first `max_rows` rows; QueryTimeout when it runs past `timeout_s` (it is interrupted)."""
        cursor = self.connection.cursor()
        timer = threading.Timer(self.limits.timeout_s, cursor.interrupt)
        timer.start()
        try:
            result = cursor.execute(sql)
            rows = result.fetchmany(self.limits.max_rows + 1)
            description = result.description or []
        except duckdb.InterruptException:
            raise QueryTimeout(
                f"the query ran past the {self.limits.timeout_s:g}-second limit and was stopped"
            ) from None
        except duckdb.OutOfMemoryException:
            raise InvalidArgument(
                "sql", f"the query needs more than the {self.limits.memory_limit_mb} MB memory limit"
            ) from None
        except duckdb.Error as error:
            raise InvalidArgument("sql", str(error)) from None
        finally:
            timer.cancel()
            cursor.close()
        return query_result(description, rows, self.limits.max_rows)
