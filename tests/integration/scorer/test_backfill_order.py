"""A model whose training scores are being published is backfilled only once they are in."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from stash_common.db import make_engine, make_sessions, transaction, upgrade
from stash_scorer import store


@pytest.fixture
def sessions(tmp_path: Path) -> Iterator[sessionmaker[Session]]:
    url = f"sqlite:///{tmp_path / 'scorer.db'}"
    upgrade("scorer", store.MIGRATIONS_DIR, url)
    engine = make_engine(url)
    yield make_sessions(engine)
    engine.dispose()


def _backfill_due(sessions: sessionmaker[Session]) -> list[str]:
    with transaction(sessions) as session:
        return [row.id for row in store.models_to_backfill(session)]


def test_a_model_first_seen_by_its_training_publication_waits_for_the_backfill_request(
    sessions: sessionmaker[Session],
) -> None:
    # Between the model's first sighting and its last published trace, a concurrent backfill pass would
    # queue the very traces the training job scored (once seen in a clean-checkout run).
    with transaction(sessions) as session:
        store.remember_model(session, "trained", "o", "refunds", "k.tar.gz", True, backfill=False)
        store.remember_model(session, "asked-for", "o", "refunds", "k2.tar.gz", True)
    assert _backfill_due(sessions) == ["asked-for"]

    with transaction(sessions) as session:
        store.request_backfill(session, "trained")
    assert sorted(_backfill_due(sessions)) == ["asked-for", "trained"]
