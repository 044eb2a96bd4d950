"""Which checkpoint's queued runs the dispatcher serves next: explicit requests first, then owners in turn."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from stash_common.db import make_engine, make_sessions, transaction, upgrade, utc_now
from stash_scorer import store


@pytest.fixture(params=["sqlite", "postgresql"])
def sessions(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[sessionmaker[Session]]:
    sqlite = request.param == "sqlite"
    url = f"sqlite:///{tmp_path / 'scorer.db'}" if sqlite else request.getfixturevalue("postgres_url")
    upgrade("scorer", store.MIGRATIONS_DIR, url)
    engine = make_engine(url)
    yield make_sessions(engine)
    engine.dispose()


def _queue(session: Session, owner_id: str, model_id: str, traces: int, explicit: bool = False, age_s: int = 0) -> None:
    model = store.ScoringModelRow(id=model_id, owner_id=owner_id, name=model_id, artifact_key=f"{model_id}.tar.gz")
    for index in range(traces):
        run = store.new_run(model, f"{model_id}-trace-{index}", 1, explicit)
        run.created_at = utc_now() - timedelta(seconds=age_s) + timedelta(milliseconds=index)
        session.add(run)


def _serve_one_batch(session: Session, batch: int = 8) -> str | None:
    """What the dispatcher does per claim: the next model, a job for up to `batch` of its runs."""
    key = store.next_batch(session)
    if key is not None:
        runs = store.queued_runs(session, key, batch)
        job = store.open_job(session, key, 0, [run.id for run in runs], timedelta(seconds=6))
        assert job is not None
        store.finish_job(session, job.id, 0, "the test's batch ended")
    return None if key is None else key.model_id


def test_another_owners_first_run_is_served_next_however_large_the_backlog(sessions: sessionmaker[Session]) -> None:
    with transaction(sessions) as session:
        _queue(session, "backlog-owner", "big", traces=400, age_s=600)
    with transaction(sessions) as session:
        assert _serve_one_batch(session) == "big"
        _queue(session, "newcomer", "small", traces=1)

    with transaction(sessions) as session:
        order = [_serve_one_batch(session) for _ in range(3)]

    # The newcomer has never been served, so it goes before the backlog's next batch; then the backlog resumes.
    assert order == ["small", "big", "big"]


def test_an_explicit_request_goes_before_every_owners_turn(sessions: sessionmaker[Session]) -> None:
    with transaction(sessions) as session:
        _queue(session, "never-served", "background", traces=3, age_s=600)
        _queue(session, "asked", "requested", traces=1, explicit=True)

        key = store.next_batch(session)
        assert key is not None and key.model_id == "requested"


def _queue_release(session: Session, owner_id: str, traces: int) -> None:
    """Release 1's runs on `traces` traces of the owner, queued in the order the traces last changed."""
    release = store.EvaluatorReleaseRow(number=1, job_key="jobs/trainer/x", artifact_key="x.tar.gz")
    for index in range(traces):
        run = store.new_release_run(release, owner_id, f"shared-trace-{index}", 1)
        run.created_at = utc_now() - timedelta(seconds=600) + timedelta(milliseconds=index)
        session.add(run)


def test_personal_and_shared_background_batches_take_turns(sessions: sessionmaker[Session]) -> None:
    with transaction(sessions) as session:
        _queue(session, "alice", "personal", traces=40, age_s=600)
        _queue_release(session, "bob", traces=40)

    with transaction(sessions) as session:
        order = [_serve_one_batch(session) for _ in range(4)]

    assert order == ["personal", "evaluator-release-1", "personal", "evaluator-release-1"]


def test_a_releases_runs_are_claimed_newest_trace_first(sessions: sessionmaker[Session]) -> None:
    with transaction(sessions) as session:
        _queue_release(session, "bob", traces=10)

    with transaction(sessions) as session:
        key = store.next_batch(session)
        assert key is not None and key.release_number == 1 and key.owner_id == "bob"
        runs = store.queued_runs(session, key, 3)
        job = store.open_job(session, key, 0, [run.id for run in runs], timedelta(seconds=6))
        assert job is not None
        claimed = [run.trace_id for run in store.job_runs(session, job.id)]

    assert claimed == ["shared-trace-9", "shared-trace-8", "shared-trace-7"]
