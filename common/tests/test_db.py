"""SQLite engines as the embedded profile opens them: WAL, foreign keys, a busy timeout."""

from __future__ import annotations

import threading
from pathlib import Path

from sqlalchemy import text

from stash_common.db import make_engine


def test_a_new_sqlite_file_is_switched_to_wal_with_foreign_keys(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'service.db'}")
    with engine.connect() as connection:
        pragmas = [connection.execute(text(f"PRAGMA {name}")).scalar() for name in ("journal_mode", "foreign_keys")]
    engine.dispose()
    assert pragmas == ["wal", 1]


def test_connections_opened_at_once_on_a_new_file_all_succeed(tmp_path: Path) -> None:
    # Two processes (a service and its test) may open a fresh database at the same moment.
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    engines = [make_engine(url) for _ in range(8)]
    barrier, failures = threading.Barrier(len(engines)), []

    def connect(index: int) -> None:
        barrier.wait()
        try:
            with engines[index].begin() as connection:
                connection.execute(text("CREATE TABLE IF NOT EXISTS probe (id INTEGER)"))
                connection.execute(text("INSERT INTO probe VALUES (:id)"), {"id": index})
        except Exception as error:  # collected, so the assertion names every failure
            failures.append(error)

    threads = [threading.Thread(target=connect, args=(index,)) for index in range(len(engines))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with engines[0].connect() as connection:
        count = connection.execute(text("SELECT count(*) FROM probe")).scalar()
    for engine in engines:
        engine.dispose()
    assert failures == [] and count == len(engines)
