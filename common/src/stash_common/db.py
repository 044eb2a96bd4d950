"""Database engines and sessions (SQLAlchemy 2) and Alembic migrations per owning service.

Each service owns its tables: its own `DeclarativeBase`, its own Alembic scripts, and its
own version table (`alembic_version_<service>`), so several services can share one
PostgreSQL database in the cluster profile or keep separate SQLite files in the embedded one.
"""

from __future__ import annotations

import fcntl
import os
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import partial
from itertools import chain
from pathlib import Path
from typing import Any

import orjson
from alembic import command, context
from alembic.config import Config
from sqlalchemy import JSON, DateTime, Dialect, Engine, MetaData, Table, TypeDecorator, create_engine, event
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from stash_common.errors import ConfigError
from stash_common.planner_statistics import rows_loaded


def utc_now() -> datetime:
    """The current time, timezone-aware (UTC): what every timestamp column stores."""
    return datetime.now(UTC)


class UtcDateTime(TypeDecorator[datetime]):
    """A timezone-aware timestamp column on every database.

    PostgreSQL hands back aware datetimes, SQLite naive ones (it keeps no zone), and Python refuses to compare
    the two: a sweep comparing a row's time with `utc_now()` would fail on SQLite. Every value written is UTC
    (`utc_now`), so a naive value read back is UTC too.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """The stored time, aware of its zone (UTC when the database kept none)."""
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


def new_id() -> str:
    """A new random row identifier (a UUID4 string)."""
    return str(uuid.uuid4())


_VARIANT = {digit: "89ab"[int(digit, 16) & 3] for digit in "0123456789abcdef"}  # RFC 4122's variant bits, 10xx


def new_ids(count: int) -> list[str]:
    """`count` new random row identifiers, UUID4 strings like `new_id`'s, from one read of the OS's randomness:
    a `uuid4` each costs a system call and a UUID object, a tenth of a 100,000-step import's time."""
    digits = os.urandom(16 * count).hex()
    ids = []
    for start in range(0, 32 * count, 32):
        hexa = digits[start : start + 32]
        ids.append(f"{hexa[:8]}-{hexa[8:12]}-4{hexa[13:16]}-{_VARIANT[hexa[16]]}{hexa[17:20]}-{hexa[20:]}")
    return ids


def normalise_url(url: str) -> str:
    """Use psycopg 3 for plain `postgresql://` URLs; other URLs pass through."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def _json_text(value: object) -> str:
    return orjson.dumps(value).decode()


def make_engine(url: str) -> Engine:
    """An engine for `url`; SQLite files get WAL, foreign keys and a busy timeout for multi-process use.

    JSON columns go through orjson: traces carry a lot of JSON (tool inputs, metadata, spans).
    """
    url = normalise_url(url)
    json_codec = {"json_serializer": _json_text, "json_deserializer": orjson.loads}
    if not url.startswith("sqlite"):
        return create_engine(url, pool_pre_ping=True, **json_codec)
    path = url.removeprefix("sqlite:///")
    if path and path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False}, **json_codec)
    lock_path = Path(f"{path}.lock") if path and path != ":memory:" else None
    event.listen(engine, "connect", partial(_configure_sqlite, lock_path))
    return engine


def _configure_sqlite(lock_path: Path | None, dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
    cursor = dbapi_connection.cursor()
    # First, so that everything after it waits for another connection's lock instead of failing.
    cursor.execute("PRAGMA busy_timeout=30000")
    with _file_lock(lock_path):
        # WAL is stored in the file, so only a new database needs the switch. SQLite does not wait (busy
        # timeout or not) when two connections of a fresh file race for it: processes starting together (the
        # embedded profile's services, a test and its servers) take turns under a lock file instead.
        if cursor.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


@contextmanager
def _file_lock(path: Path | None) -> Iterator[None]:
    """An exclusive advisory lock on `path` across processes (nothing for an in-memory database)."""
    if path is None:
        yield
        return
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def make_sessions(engine: Engine) -> sessionmaker[Session]:
    """A session factory whose objects stay readable after commit."""
    return sessionmaker(engine, expire_on_commit=False)


def insert_rows(session: Session, table: Table, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Insert many rows, each the values of `columns` in that order, in the session's transaction: COPY on
    PostgreSQL (an order of magnitude faster than multi-row INSERTs for thousands of rows), executemany
    elsewhere. JSON columns take plain JSON values (dicts, lists, …). The rows count towards a refresh of the
    table's planner statistics once the transaction commits (`planner_statistics`), unless the table is declared
    temporary (`info={"temporary": True}`).

    `rows` may be a generator: COPY sends each row as it comes, so the server stores the first rows while the
    caller still builds the rest (a 100,000-step import built all its rows first, 0.3 s with the server idle).
    """
    if session.get_bind().dialect.name != "postgresql":
        values = [dict(zip(columns, row, strict=True)) for row in rows]
        if values:
            session.execute(table.insert(), values)
        return
    pending = iter(rows)
    first = next(pending, None)
    if first is None:
        return
    count = _copy(session, table, columns, chain((first,), pending))
    if not table.info.get("temporary"):
        rows_loaded(session, table.name, count)


def _copy(session: Session, table: Table, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> int:
    """COPY the rows into `table`, encoding its JSON columns; how many rows there were."""
    import psycopg  # loaded already on PostgreSQL; a SQLite-only process never imports it

    json_columns = {column.name for column in table.columns if isinstance(column.type, JSON)}
    json_positions = [position for position, name in enumerate(columns) if name in json_columns]
    driver = session.connection().connection.driver_connection
    assert driver is not None, "a live session always has a driver connection"
    statement = f"COPY {table.name} ({', '.join(columns)}) FROM STDIN"
    count = 0
    try:
        with driver.cursor().copy(statement) as copy:
            for row in rows:
                if json_positions:
                    row = list(row)
                    for position in json_positions:
                        if row[position] is not None:
                            row[position] = _json_text(row[position])
                copy.write_row(row)
                count += 1
    except psycopg.Error as error:
        # As SQLAlchemy raises a statement's error (an IntegrityError for a duplicate key, which callers retry).
        raise DBAPIError.instance(statement, None, error, psycopg.Error) from error
    return count


@contextmanager
def transaction(sessions: sessionmaker[Session]) -> Iterator[Session]:
    """One unit of work: commits when the block ends, rolls everything back if it raises."""
    with sessions() as session, session.begin():
        yield session


def alembic_config(service: str, migrations_dir: Path, url: str) -> Config:
    """The Alembic configuration of one service's migrations against `url`."""
    config = Config()
    config.set_main_option("script_location", str(migrations_dir))
    config.set_main_option("sqlalchemy.url", normalise_url(url).replace("%", "%%"))
    config.attributes["version_table"] = f"alembic_version_{service}"
    return config


def upgrade(service: str, migrations_dir: Path, url: str, revision: str = "head") -> None:
    """Bring one service's tables up to `revision`."""
    command.upgrade(alembic_config(service, migrations_dir, url), revision)


def downgrade(service: str, migrations_dir: Path, url: str, revision: str = "base") -> None:
    """Take one service's tables down to `revision`."""
    command.downgrade(alembic_config(service, migrations_dir, url), revision)


def run_migrations(config: Config, target_metadata: MetaData) -> None:
    """The body of every service's `migrations/env.py` (online mode only)."""
    url = config.get_main_option("sqlalchemy.url")
    if url is None:
        raise ConfigError("the Alembic configuration has no sqlalchemy.url; run migrations through upgrade()")
    # make_engine, not create_engine: a migration opens the SQLite file in WAL mode with the busy timeout like
    # every other connection, or a service switching a fresh file to WAL finds it locked by the migration.
    engine = make_engine(url)
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            version_table=config.attributes["version_table"],
            render_as_batch=connection.dialect.name == "sqlite",
        )
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()
