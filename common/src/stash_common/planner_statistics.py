"""Fresh planner statistics after bulk loads (PostgreSQL).

PostgreSQL plans every query from statistics that autovacuum refreshes at most once a minute. Until then a table
that has just been created or doubled is planned as it was: after a 100,000-step import, ingest's read of 25
traces' steps became a parallel scan of the whole steps table (46 ms at 300,000 rows, growing with the table;
7 ms through the index once analyzed), and labelling slowed with every import. PostgreSQL's manual says to run
ANALYZE after loading a table in bulk; this does it, on a background thread, so an import's answer never waits
for it.

A transaction counts the rows it loads per table (`rows_loaded`: `db.insert_rows` counts its COPYs); once it
commits, the counts go to a background thread that analyzes a table when the rows loaded since its last
refresh reach the rows PostgreSQL estimates it holds (the table has doubled), or it was never analyzed. Each
ANALYZE reads a sample of up to 30,000 rows: refreshed at a fifth instead, chunk_labels (7,400 labels a save)
was analyzed fourteen times in one benchmark run of 400,000 labels, which cost more than the scans it saved.
A rolled-back transaction's counts are dropped with it. SQLite keeps no such estimates that go stale: nothing is
counted there.
"""

from __future__ import annotations

import threading
import weakref

import structlog
from sqlalchemy import Connection, Engine, event, text
from sqlalchemy.orm import Session

log = structlog.get_logger()

GROWTH_TO_REFRESH = 1.0  # of the rows PostgreSQL estimates a table holds: analyzed when it has doubled
_LOADED = "stash.rows_loaded"  # the key of the counts in a session's `info`


def rows_loaded(session: Session, table: str, rows: int) -> None:
    """Count `rows` loaded into `table` by the session's transaction, for a refresh once it commits (PostgreSQL
    only). Never a temporary table: the refresh's own connection cannot see it."""
    if rows and session.get_bind().dialect.name == "postgresql":
        counts = session.info.setdefault(_LOADED, {})
        counts[table] = counts.get(table, 0) + rows


def refresh_if_grown(engine: Engine, table: str, rows: int) -> bool:
    """Analyze `table` if `rows` loaded since its last refresh are a large share of it; False when they are not
    yet (keep counting). A table that no longer exists is left alone (True: nothing left to count)."""
    with engine.connect() as connection:
        estimated = connection.execute(
            text("SELECT reltuples FROM pg_class WHERE oid = to_regclass(:table)"), {"table": table}
        ).scalar()
        if estimated is None:
            return True
        if estimated >= 0 and rows < GROWTH_TO_REFRESH * estimated:  # -1: never analyzed
            return False
        connection.execute(text(f'ANALYZE "{table}"'))  # a name from the services' own tables, never a user's
        connection.commit()
    log.info("planner statistics refreshed", table=table, rows_loaded=rows, rows_estimated_before=int(estimated))
    return True


class _Refresher:
    """The background thread that refreshes the tables committed loads grew, one table at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # Rows loaded per table since its last refresh, per engine; an engine disposed of and dropped (a test's)
        # is forgotten with its counts.
        self._loaded: weakref.WeakKeyDictionary[Engine, dict[str, int]] = weakref.WeakKeyDictionary()
        self._due: set[tuple[Engine, str]] = set()  # tables that grew since they were last looked at
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def committed(self, engine: Engine, counts: dict[str, int]) -> None:
        with self._lock:
            loaded = self._loaded.setdefault(engine, {})
            for table, rows in counts.items():
                loaded[table] = loaded.get(table, 0) + rows
                self._due.add((engine, table))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="planner-statistics", daemon=True)
                self._thread.start()
        self._wake.set()

    def _run(self) -> None:
        while self._wake.wait():
            self._wake.clear()
            with self._lock:
                due, self._due = self._due, set()
            for engine, table in due:
                self._refresh(engine, table)

    def _refresh(self, engine: Engine, table: str) -> None:
        with self._lock:
            rows = self._loaded[engine][table]
        try:
            refreshed = refresh_if_grown(engine, table, rows)
        except Exception as error:  # a lost database: the next load tries again, autovacuum catches up meanwhile
            log.warning("planner statistics not refreshed", table=table, reason=str(error))
            return
        if refreshed:
            with self._lock:
                self._loaded[engine][table] -= rows  # loads committed meanwhile count towards the next refresh


_REFRESHER = _Refresher()


@event.listens_for(Session, "after_commit")
def _refresh_after_commit(session: Session) -> None:
    counts = session.info.pop(_LOADED, None)
    if counts:
        bind = session.get_bind()
        _REFRESHER.committed(bind.engine if isinstance(bind, Connection) else bind, counts)


@event.listens_for(Session, "after_rollback")
def _forget_after_rollback(session: Session) -> None:
    session.info.pop(_LOADED, None)
