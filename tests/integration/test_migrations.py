"""Alembic migrations run up and down on SQLite and PostgreSQL, and match the models."""

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from stash_common.db import downgrade, make_engine, normalise_url, upgrade
from stash_gateway import store as gateway_store
from stash_gepa import store as gepa_store
from stash_ingest import store as ingest_store
from stash_labeler import store as labeler_store
from stash_scorer import store as scorer_store
from stash_trainer import store as trainer_store
from stash_trainer.evaluator import store as evaluator_store  # noqa: F401  (the trainer's evaluator tables)

# Every service with tables: (service, migrations directory, declarative base).
OWNERS = [
    ("gateway", gateway_store.MIGRATIONS_DIR, gateway_store.Base),
    ("ingest", ingest_store.MIGRATIONS_DIR, ingest_store.Base),
    ("labeler", labeler_store.MIGRATIONS_DIR, labeler_store.Base),
    ("trainer", trainer_store.MIGRATIONS_DIR, trainer_store.Base),
    ("scorer", scorer_store.MIGRATIONS_DIR, scorer_store.Base),
    ("gepa", gepa_store.MIGRATIONS_DIR, gepa_store.Base),
]


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'migrations.db'}"
    return request.getfixturevalue("empty_postgres_url")


@pytest.mark.parametrize(("service", "migrations", "base"), OWNERS)
def test_upgrade_creates_tables_matching_the_models(service: str, migrations: Path, base, database_url: str) -> None:
    upgrade(service, migrations, database_url)

    engine = make_engine(database_url)
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"version_table": f"alembic_version_{service}"})
        differences = compare_metadata(context, base.metadata)
        tables = set(inspect(connection).get_table_names())
    engine.dispose()
    assert differences == []
    assert set(base.metadata.tables) | {f"alembic_version_{service}"} <= tables


@pytest.mark.parametrize(("service", "migrations", "base"), OWNERS)
def test_downgrade_removes_every_table(service: str, migrations: Path, base, database_url: str) -> None:
    upgrade(service, migrations, database_url)
    downgrade(service, migrations, database_url)

    engine = make_engine(database_url)
    with engine.connect() as connection:
        tables = set(inspect(connection).get_table_names())
    engine.dispose()
    assert not set(base.metadata.tables) & tables


def test_upgrade_twice_is_harmless(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'twice.db'}"

    upgrade("gateway", gateway_store.MIGRATIONS_DIR, url)
    upgrade("gateway", gateway_store.MIGRATIONS_DIR, url)


def test_plain_postgresql_urls_use_psycopg3() -> None:
    assert normalise_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"
    assert normalise_url("sqlite:///x.db") == "sqlite:///x.db"


def test_no_two_services_name_a_table_alike() -> None:
    # One PostgreSQL database may hold every service's tables (the tests' cluster stacks do).
    names = [table for _, _, base in OWNERS for table in base.metadata.tables]
    assert len(names) == len(set(names)), sorted(name for name in names if names.count(name) > 1)
