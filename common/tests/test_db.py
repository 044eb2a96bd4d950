"""SQLite engines as the embedded profile opens them (WAL, foreign keys, a busy timeout), and row ids."""

from __future__ import annotations

import multiprocessing
import time
import uuid
from pathlib import Path

from sqlalchemy import text

from stash_common.db import make_engine, new_ids


def test_a_new_sqlite_file_is_switched_to_wal_with_foreign_keys(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'service.db'}")
    with engine.connect() as connection:
        pragmas = [connection.execute(text(f"PRAGMA {name}")).scalar() for name in ("journal_mode", "foreign_keys")]
    engine.dispose()
    assert pragmas == ["wal", 1]


def _open_and_write(url: str, index: int, start_at: float) -> str | None:
    """In its own process: wait for the common start, then create-and-insert; the error's text if any."""
    while time.monotonic() < start_at:
        pass
    engine = make_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(text("CREATE TABLE IF NOT EXISTS probe (id INTEGER)"))
            connection.execute(text("INSERT INTO probe VALUES (:id)"), {"id": index})
    except Exception as error:  # returned, so the assertion names every failure
        return str(error)
    finally:
        engine.dispose()
    return None


def test_processes_opening_a_new_file_at_once_all_succeed(tmp_path: Path) -> None:
    # The embedded profile's services, or a test and its servers, open a fresh database at the same moment;
    # a few rounds, because the race for the switch to WAL is won or lost in microseconds.
    processes, rounds = 12, 4
    context = multiprocessing.get_context("fork")
    with context.Pool(processes) as pool:
        for round_index in range(rounds):
            url = f"sqlite:///{tmp_path / f'shared-{round_index}.db'}"
            start_at = time.monotonic() + 0.3
            failures = [f for f in pool.starmap(_open_and_write, [(url, i, start_at) for i in range(processes)]) if f]
            engine = make_engine(url)
            with engine.connect() as connection:
                count = connection.execute(text("SELECT count(*) FROM probe")).scalar()
            engine.dispose()
            assert (failures, count) == ([], processes)


def test_ids_made_in_a_batch_are_distinct_uuid4_strings() -> None:
    ids = new_ids(1000)

    assert len(set(ids)) == 1000
    assert all(str(uuid.UUID(value)) == value and uuid.UUID(value).version == 4 for value in ids)
    assert {uuid.UUID(value).variant for value in ids} == {uuid.RFC_4122}
