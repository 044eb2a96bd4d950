"""Planner statistics refreshed after bulk loads on a real PostgreSQL: a committed COPY into a table never analyzed,
or one that doubles it, is analyzed at once, in the background; smaller loads wait until they add up; rolled-back
loads count for nothing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Column, Engine, Integer, MetaData, Table, Text, text

from stash_common.db import insert_rows, make_engine, make_sessions, transaction
from stash_common.planner_statistics import refresh_if_grown
from support.scorer import wait_until

METADATA = MetaData()
LOADED = Table("loaded", METADATA, Column("id", Integer, primary_key=True), Column("body", Text))
MARKER = Table("marker", METADATA, Column("id", Integer, primary_key=True))
ROLLED_BACK = Table("rolled_back", METADATA, Column("id", Integer, primary_key=True))


class Rollback(Exception):
    pass


@pytest.fixture
def engine(empty_postgres_url: str) -> Iterator[Engine]:
    engine = make_engine(empty_postgres_url)
    METADATA.create_all(engine)
    yield engine
    engine.dispose()


def _estimated_rows(engine: Engine, table: Table) -> float:
    """What PostgreSQL's planner believes the table holds: -1 until it is first analyzed."""
    with engine.connect() as connection:
        return float(
            connection.execute(
                text("SELECT reltuples FROM pg_class WHERE relname = :t"), {"t": table.name}
            ).scalar_one()
        )


def _load(engine: Engine, table: Table, ids: range) -> None:
    with transaction(make_sessions(engine)) as session:
        insert_rows(session, table, ["id"], [[number] for number in ids])


def test_a_committed_bulk_load_is_analyzed_in_the_background(engine: Engine) -> None:
    assert _estimated_rows(engine, LOADED) == -1

    with transaction(make_sessions(engine)) as session:
        # Rows from a generator, as ingest streams its steps into COPY: each stored, all counted.
        insert_rows(session, LOADED, ["id", "body"], ((number, f"row {number}") for number in range(2000)))
        insert_rows(session, LOADED, ["id", "body"], iter(()))  # nothing to copy

    wait_until(lambda: _estimated_rows(engine, LOADED) == 2000, timeout_s=30, what="the table analyzed")
    with engine.connect() as connection:
        assert connection.execute(text("SELECT count(*), max(body) FROM loaded")).one() == (2000, "row 999")


def test_a_rolled_back_load_counts_for_nothing(engine: Engine) -> None:
    with make_sessions(engine)() as session:
        with pytest.raises(Rollback), session.begin():
            insert_rows(session, ROLLED_BACK, ["id"], [[number] for number in range(500)])
            raise Rollback
        with session.begin():  # the same session's next transaction commits, having loaded nothing
            session.execute(text("SELECT 1"))

    # Two committed loads, each waited for: the refresher has looked at everything handed to it before them.
    for table in (LOADED, MARKER):
        _load(engine, table, range(10))
        wait_until(
            lambda table=table: _estimated_rows(engine, table) == 10, timeout_s=30, what=f"{table.name} analyzed"
        )
    assert _estimated_rows(engine, ROLLED_BACK) == -1


def test_loads_smaller_than_the_table_wait_until_they_double_it(engine: Engine) -> None:
    with engine.begin() as connection:
        connection.execute(text("INSERT INTO loaded (id) SELECT generate_series(1, 1000)"))
        connection.execute(text("ANALYZE loaded"))
        connection.execute(text("INSERT INTO loaded (id) SELECT generate_series(1001, 2000)"))

    assert refresh_if_grown(engine, "loaded", 600) is False
    assert _estimated_rows(engine, LOADED) == 1000
    assert refresh_if_grown(engine, "loaded", 1000) is True
    assert _estimated_rows(engine, LOADED) == 2000


def test_a_temporary_table_is_not_counted_and_a_missing_one_is_left_alone(engine: Engine) -> None:
    incoming = Table("incoming", MetaData(), Column("id", Integer), info={"temporary": True})
    with transaction(make_sessions(engine)) as session:
        session.execute(text("CREATE TEMPORARY TABLE incoming (id integer) ON COMMIT DROP"))
        insert_rows(session, incoming, ["id"], [[number] for number in range(100)])
        insert_rows(session, MARKER, ["id"], [[1]])
        # The refresh's connection could not see the temporary table: only the marker's row is counted.
        assert list(session.info.values()) == [{"marker": 1}]
    assert refresh_if_grown(engine, "no_such_table", 10_000) is True
