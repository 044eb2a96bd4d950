"""A wired scorer on PostgreSQL (SQLite where a test asks): real ingest and trainer servicers, the scorer
and its dispatcher, on real ports."""

import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from stash_ingest.titles import derive_title
from support.ingest import serve_ingest
from support.scorer import RunningScorer, Wired, serve_scorer, serve_trainer

TESTS_DIR = Path(__file__).resolve().parents[2]


@pytest.fixture
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """PostgreSQL (the cluster profile's database), or the embedded profile's SQLite file with `sqlite` as param."""
    if getattr(request, "param", "postgresql") == "sqlite":
        return f"sqlite:///{tmp_path / 'stash.db'}"
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def ingest_settle() -> timedelta:
    """How old a change must be before ingest lists it to the scorer's sweep (a test may parametrize it)."""
    return timedelta(0)


@pytest.fixture
def wired(
    database_url: str, ingest_settle: timedelta, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Wired]:
    # The dispatcher launches `python -m support.scoring_worker`, which lives beside these tests.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(TESTS_DIR), os.environ.get("PYTHONPATH")])))
    monkeypatch.delenv("STASH_TEST_SCORING_WORKER", raising=False)
    ingest, stop_ingest = serve_ingest(database_url, derive_title, settle=ingest_settle)
    trainer = serve_trainer(database_url)
    scorers: list[RunningScorer] = []

    def scorer(**options: Any) -> RunningScorer:
        running = serve_scorer(database_url, ingest, trainer.stub, tmp_path / "scoring-jobs", **options)
        scorers.append(running)
        return running

    yield Wired(ingest, trainer, scorer)
    for running in scorers:
        running.stop()
    trainer.stop()
    stop_ingest()
