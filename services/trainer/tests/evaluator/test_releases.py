"""Candidates, the release gate, numbered releases, rollbacks and their pending publications, on both databases.

The scores a candidate's worker would leave are given here directly; the real training that produces them is
tests/e2e/test_evaluator_releases.py.
"""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session, sessionmaker

from stash_common.coordination import InProcessWakeups
from stash_common.db import make_engine, make_sessions, transaction, utc_now
from stash_common.errors import FailedPrecondition, InvalidArgument, NotFound
from stash_common.jobs.local import LocalSubprocessLauncher
from stash_common.jobs.training_scores import ACTION_SCORES_FILE
from stash_common.jobs.transfer import job_key
from stash_common.storage import LocalObjectStore
from stash_trainer import store
from stash_trainer.dispatcher import GONE_REASON, Dispatcher, JobSettings, PublishedScores
from stash_trainer.evaluator import benchmarks, consent, releases
from stash_trainer.evaluator.gate import decide, wilson
from stash_trainer.evaluator.store import OperatorActionRow
from support.evaluator import admit_every_comparison, group, rated_trace

TRACES = [
    rated_trace("alice", "a1", "refund 1"),
    rated_trace("alice", "a2", "refund 2"),
    rated_trace("bob", "b1", "refund 3"),
    rated_trace("bob", "b2", "refund 4"),
]


@pytest.fixture
def objects(tmp_path: Path) -> LocalObjectStore:
    return LocalObjectStore(tmp_path / "objects", "http://127.0.0.1:1", b"k" * 32)


@pytest.fixture
def frozen(sessions: sessionmaker[Session]) -> str:
    """Every comparison admitted, and bob's two task groups frozen as benchmark core; its version id."""
    admit_every_comparison(sessions, TRACES)
    with transaction(sessions) as session:
        return benchmarks.freeze(session, "ann", "core", [group(TRACES[2]), group(TRACES[3])]).id


def trained(sessions: sessionmaker[Session], objects: LocalObjectStore, actor: str = "ann") -> str:
    """A candidate started and claimed by a dispatcher (its model has a job id); its id."""
    with transaction(sessions) as session:
        candidate_id = releases.start_candidate(session, objects, actor, "base", "local").id
    with transaction(sessions) as session:
        assert store.claim(session, candidate_id) is not None
    return candidate_id


def scores(sessions: sessionmaker[Session], objects: LocalObjectStore, candidate_id: str, right: int) -> dict:
    """Worker scores on the candidate's benchmark items: the first `right` comparisons the right way round."""
    with transaction(sessions) as session:
        _, items = releases.training_inputs(session, objects, candidate_id, 0)
    comparisons = sorted({item["step_id"].rsplit(":", 1)[0] for item in items})
    result = {}
    for position, item in enumerate(items):
        comparison, side = item["step_id"].rsplit(":", 1)
        good = comparisons.index(comparison) < right
        result[(item["trace_id"], item["step_id"])] = float((side == "better") == good) + position * 1e-6
    return result


def test_wilson_interval_matches_the_textbook_values() -> None:
    low, high = wilson(8, 10)
    assert (round(low, 3), round(high, 3)) == (0.490, 0.943)
    assert wilson(0, 0) == (0.0, 1.0)
    assert wilson(4, 4)[1] == 1.0 and wilson(0, 4)[0] == 0.0


def test_a_candidate_records_its_inputs_and_trains_from_the_snapshot(
    sessions: sessionmaker[Session], objects: LocalObjectStore, frozen: str
) -> None:
    candidate_id = trained(sessions, objects)

    with transaction(sessions) as session:
        ((row, model),) = releases.candidates(session)
        lines, items = releases.training_inputs(session, objects, candidate_id, 0)
        assert model is not None and releases.is_candidate(model) and model.owner_id == releases.EVALUATOR_OWNER
        assert [entry["id"] for entry in row.benchmarks] == [frozen] and row.policy["epochs"] == 1
        assert releases.status_of(row, model) == "training"
        store.finish(model, store.SUCCEEDED)
        assert releases.status_of(row, model) == "evaluating"  # trained, not gated yet
    held = {trace for line in lines for trace in line["trace_ids"]}
    assert held == {"a1", "a2"}  # the benchmark's traces never train
    assert {item["trace_id"] for item in items} == {frozen} and len(items) % 2 == 0


def test_a_candidate_needs_a_frozen_benchmark(sessions: sessionmaker[Session], objects: LocalObjectStore) -> None:
    admit_every_comparison(sessions, TRACES)
    with pytest.raises(FailedPrecondition, match="freeze a benchmark first"), transaction(sessions) as session:
        releases.start_candidate(session, objects, "ann", "base", "local")


def test_a_candidate_started_after_a_revocation_is_not_evaluated_on_that_accounts_comparisons(
    sessions: sessionmaker[Session], objects: LocalObjectStore
) -> None:
    dan = rated_trace("dan", "d1", "refund 5")
    admit_every_comparison(sessions, [*TRACES, dan])
    with transaction(sessions) as session:
        version = benchmarks.freeze(session, "ann", "core", [group(TRACES[2]), group(dan)])
        bobs = {item["comparison_id"] for item in version.items if item["owner_id"] == "bob"}
        assert version.size == 2 and len(bobs) == 1
    before = trained(sessions, objects)
    with transaction(sessions) as session:
        consent.revoke(session, "bob", "bob")
    after = trained(sessions, objects)

    with transaction(sessions) as session:
        inputs = {row.id: row.benchmarks for row, _ in releases.candidates(session)}
        assert [entry["withdrawn"] for entry in inputs[before]] == [[]]
        assert [entry["withdrawn"] for entry in inputs[after]] == [sorted(bobs)]
        _, items = releases.training_inputs(session, objects, after, 0)
        assert len(items) == 2 and not any(item["step_id"].startswith(tuple(bobs)) for item in items)
        report = releases.settle(session, after, scores(sessions, objects, after, 1)).report
        assert report is not None and (report[0]["n"], report[0]["correct"]) == (1, 1)
        assert list(report[0]["slices"]["owner"]) == ["dan"]  # the frozen version itself still holds bob's
        assert benchmarks.benchmarks(session)[0].size == 2

    with transaction(sessions) as session:
        consent.revoke(session, "dan", "dan")
    with pytest.raises(FailedPrecondition, match="withdrawn by a revoked consent"), transaction(sessions) as session:
        releases.start_candidate(session, objects, "ann", "base", "local")


def test_first_passes_against_no_evaluator_worse_is_refused_better_released_and_rollback_republishes(
    sessions: sessionmaker[Session], objects: LocalObjectStore, frozen: str
) -> None:
    first = trained(sessions, objects)
    with transaction(sessions) as session:
        size = len(releases.training_inputs(session, objects, first, 0)[1]) // 2
        row = releases.settle(session, first, scores(sessions, objects, first, size - 1))
        assert (row.decision, row.gate) == ("awaiting_approval", {"passed": True, "compared_with": None, "reasons": []})
    with transaction(sessions) as session:
        assert releases.approve(session, "ann", first).number == 1
    with pytest.raises(FailedPrecondition, match="only a candidate awaiting approval"), transaction(sessions) as s:
        releases.approve(s, "ann", first)

    worse = trained(sessions, objects)
    with transaction(sessions) as session:
        row = releases.settle(session, worse, scores(sessions, objects, worse, 0))
        assert row.decision == "refused" and row.gate is not None and row.gate["compared_with"] == 1
        assert "on core v1 accuracy 0.000 is not at least release 1's" in (row.reason or "")

    with transaction(sessions) as session:
        releases.set_policy(session, "ann", {"auto_release": True, "epochs": 2})
    better = trained(sessions, objects)
    with transaction(sessions) as session:
        row = releases.settle(session, better, scores(sessions, objects, better, size))
        assert row.decision == "released" and row.policy["epochs"] == 2
        assert releases.current_number(session) == 2

    with transaction(sessions) as session:
        releases.rollback(session, "ann", 1)
    with transaction(sessions) as session:
        assert releases.current_number(session) == 1
        assert [(p.number, p.kind) for p in releases.pending(session)] == [
            (1, "release"),
            (2, "release"),
            (1, "rollback"),
        ]
        actions = [a.action for a in session.scalars(select(OperatorActionRow))]
        assert {"release", "rollback", "set_training_policy", "train_candidate"} <= set(actions)
        notes = releases.releases(session)[-1].notes
        assert f"accuracy {(size - 1) / size:.3f} on core v1" in notes
    with pytest.raises(FailedPrecondition, match="already the current release"), transaction(sessions) as session:
        releases.rollback(session, "ann", 1)
    with pytest.raises(NotFound, match="release 9"), transaction(sessions) as session:
        releases.rollback(session, "ann", 9)


def test_a_slice_worse_than_the_tolerance_fails_the_gate() -> None:
    def entry(overall: float, tool: float) -> dict:
        slices = {"action_type": {"tool_call": {"accuracy": tool}, "response": {"accuracy": overall}}}
        return {"benchmark_id": "b", "name": "core", "version": 1, "accuracy": overall, "slices": slices}

    refused = decide([entry(0.9, 0.5)], (3, [entry(0.8, 0.7)]), None, 0.0, 0.1)
    passed = decide([entry(0.9, 0.65)], (3, [entry(0.8, 0.7)]), None, 0.0, 0.1)

    assert not refused.passed and "slice action_type=tool_call accuracy 0.500" in refused.reasons[0]
    assert passed.passed and passed.compared_with == 3


def test_the_policy_is_validated_and_the_schedule_waits_for_new_comparisons(
    sessions: sessionmaker[Session], objects: LocalObjectStore, frozen: str
) -> None:
    with pytest.raises(InvalidArgument, match="epochs"), transaction(sessions) as session:
        releases.set_policy(session, "ann", {"epochs": 0})
    with transaction(sessions) as session:
        assert not releases.due(session, utc_now())  # no schedule
        releases.set_policy(session, "ann", {"schedule_minutes": 60, "min_new_comparisons": 1})
        assert releases.due(session, utc_now())
    trained(sessions, objects)
    with transaction(sessions) as session:
        assert not releases.due(session, utc_now() + timedelta(hours=2))  # nothing new since its snapshot
        assert releases.policy_of(session)[1] is not None


def test_the_schedule_starts_a_due_candidate_once(
    sessions: sessionmaker[Session], objects: LocalObjectStore, frozen: str
) -> None:
    with transaction(sessions) as session:
        assert releases.start_scheduled(session, objects, "base", "local") is None  # the defaults schedule nothing
        releases.set_policy(session, "ann", {"schedule_minutes": 60, "min_new_comparisons": 1})
    with transaction(sessions) as session:
        started = releases.start_scheduled(session, objects, "base", "local")
        assert started is not None and started.created_by == releases.SCHEDULE_ACTOR
    with transaction(sessions) as session:
        assert releases.start_scheduled(session, objects, "base", "local") is None
        assert [row.id for row, _ in releases.candidates(session)] == [started.id]


def test_two_replicas_running_the_schedule_at_once_start_one_candidate(postgres_url: str, tmp_path: Path) -> None:
    """The second replica's check waits for the first's lock; once the first commits, nothing is due any more."""
    engine = make_engine(postgres_url)
    sessions = make_sessions(engine)
    objects = LocalObjectStore(tmp_path / "objects", "http://127.0.0.1:1", b"k" * 32)
    admit_every_comparison(sessions, TRACES)
    with transaction(sessions) as session:
        benchmarks.freeze(session, "ann", "core", [group(TRACES[2]), group(TRACES[3])])
        releases.set_policy(session, "ann", {"schedule_minutes": 60, "min_new_comparisons": 1})
    second: list[object] = []

    def second_replica() -> None:
        with transaction(sessions) as session:
            second.append(releases.start_scheduled(session, objects, "base", "local"))

    with transaction(sessions) as session:
        first = releases.start_scheduled(session, objects, "base", "local")
        assert first is not None
        replica = threading.Thread(target=second_replica)
        replica.start()
        while replica.is_alive() and not _waiting_for_a_lock(engine):
            replica.join(0.05)
    replica.join()

    assert second == [None]
    with transaction(sessions) as session:
        assert [row.id for row, _ in releases.candidates(session)] == [first.id]
    engine.dispose()


def _waiting_for_a_lock(engine: Engine) -> bool:
    query = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
    with engine.connect() as connection:
        return bool(connection.exec_driver_sql(query).scalar())


class _RecordingScorer:
    """Records the candidates' training jobs it is told (the scorer's side is tests/e2e)."""

    def __init__(self) -> None:
        self.told: list[tuple[str, str]] = []

    def publish_training_scores(self, owner_id: str, reward_model_id: str, job_key: str) -> PublishedScores:
        self.told.append((reward_model_id, job_key))
        return PublishedScores(0, 0)


def _trainer(sessions: sessionmaker[Session], objects: LocalObjectStore, tmp_path: Path) -> tuple[Dispatcher, list]:
    """A freshly started trainer's dispatcher (nothing watched, nothing gating) and what it told the scorer."""
    scorer = _RecordingScorer()
    dispatcher = Dispatcher(
        sessions,
        None,  # type: ignore[arg-type]  # a candidate reads no trace
        scorer,
        objects,
        LocalSubprocessLauncher(tmp_path / "logs"),
        InProcessWakeups(),
        JobSettings("127.0.0.1:1", lease_s=1.0),
    )
    return dispatcher, scorer.told


def _trained_then_interrupted(
    sessions: sessionmaker[Session], objects: LocalObjectStore, right: int | None
) -> tuple[str, str]:
    """A candidate whose worker succeeded (leaving its scores when `right` is given) a minute ago and whose trainer
    stopped before gating it; (its id, its job's key)."""
    candidate_id = trained(sessions, objects)
    item_scores = scores(sessions, objects, candidate_id, right or 0)
    with transaction(sessions) as session:
        model = session.get_one(store.RewardModelRow, candidate_id)
        store.finish(model, store.SUCCEEDED)
        model.finished_at = utc_now() - timedelta(minutes=1)
        key = job_key("trainer", model.job_id or "")
    if right is not None:
        lines = [{"trace_id": t, "step_id": s, "score": score} for (t, s), score in item_scores.items()]
        objects.put(f"{key}/{ACTION_SCORES_FILE}", "".join(json.dumps(line) + "\n" for line in lines).encode())
    return candidate_id, key


def test_a_restarted_trainer_gates_a_candidate_its_predecessor_left_ungated(
    sessions: sessionmaker[Session], objects: LocalObjectStore, frozen: str, tmp_path: Path
) -> None:
    candidate_id, key = _trained_then_interrupted(sessions, objects, right=2)
    with transaction(sessions) as session:
        assert releases.status_of(*releases.candidates(session)[0]) == releases.EVALUATING

    dispatcher, told = _trainer(sessions, objects, tmp_path)
    assert dispatcher.sweep() == []

    assert told == [(candidate_id, key)]  # the scorer knows the job before its files go
    assert not objects.exists(f"{key}/{ACTION_SCORES_FILE}")
    with transaction(sessions) as session:
        row, model = releases.candidates(session)[0]
        assert releases.status_of(row, model) == releases.AWAITING and row.report
    assert dispatcher.resume_ungated_candidates() == []  # gated once


def test_a_candidate_left_ungated_without_its_scores_is_refused_with_why(
    sessions: sessionmaker[Session], objects: LocalObjectStore, frozen: str, tmp_path: Path
) -> None:
    candidate_id, _ = _trained_then_interrupted(sessions, objects, right=None)

    dispatcher, told = _trainer(sessions, objects, tmp_path)
    assert dispatcher.resume_ungated_candidates() == [candidate_id]

    assert told == []
    with transaction(sessions) as session:
        row, model = releases.candidates(session)[0]
        assert (releases.status_of(row, model), row.reason) == (releases.REFUSED, GONE_REASON)


def test_a_candidate_gated_already_is_not_gated_again(
    sessions: sessionmaker[Session], objects: LocalObjectStore, frozen: str
) -> None:
    candidate_id = trained(sessions, objects)
    with transaction(sessions) as session:
        first = releases.settle(session, candidate_id, scores(sessions, objects, candidate_id, 2))
        gated = (first.decision, first.reason, first.report)
    with transaction(sessions) as session:
        releases.fail(session, candidate_id, "late")
        row = releases.settle(session, candidate_id, scores(sessions, objects, candidate_id, 0))
        assert (row.decision, row.reason, row.report) == gated and row.decision == releases.AWAITING
