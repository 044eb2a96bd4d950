"""The evaluator's tables on both profiles' databases."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from stash_common.db import make_engine, make_sessions, upgrade
from stash_trainer.store import MIGRATIONS_DIR


@pytest.fixture(params=["sqlite", "postgresql"])
def sessions(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[sessionmaker[Session]]:
    """The trainer's migrated tables on SQLite (embedded) and PostgreSQL (cluster)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'trainer.db'}"
    else:
        url = request.getfixturevalue("postgres_url")
    upgrade("trainer", MIGRATIONS_DIR, url)
    engine = make_engine(url)
    yield make_sessions(engine)
    engine.dispose()
