"""Frozen benchmarks: immutable versions, disjoint by task group and trace, held out of every snapshot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from stash_common.db import transaction
from stash_common.errors import FailedPrecondition, InvalidArgument
from stash_common.storage import LocalObjectStore
from stash_trainer.evaluator import benchmarks, consent
from stash_trainer.evaluator.corpus import ConsentedTrace
from stash_trainer.evaluator.store import BenchmarkRow, ComparisonRow, OperatorActionRow, SnapshotRow
from support.evaluator import admit_every_comparison, group, rated_trace

TRACES = [
    rated_trace("alice", "a1", "refund 1"),
    rated_trace("alice", "a2", "refund 2"),
    rated_trace("bob", "b1", "refund 3"),
]


def objects_in(tmp_path: Path) -> LocalObjectStore:
    return LocalObjectStore(tmp_path / "objects", "http://127.0.0.1:1", b"k" * 32)


def admit_all(sessions: sessionmaker[Session], traces: list[ConsentedTrace] = TRACES) -> None:
    admit_every_comparison(sessions, traces)


def test_freezing_records_an_immutable_version_with_hash_slices_and_size(sessions: sessionmaker[Session]) -> None:
    admit_all(sessions)
    with transaction(sessions) as session:
        first = benchmarks.freeze(session, "operator", "core", [group(TRACES[0])])
        again = benchmarks.freeze(session, "operator", "core", [group(TRACES[0])])
        wider = benchmarks.freeze(session, "operator", "core", [group(TRACES[0]), group(TRACES[1])])

    assert again.id == first.id
    # Alice's two traces give four pairs (each repair against each wrong answer); only one lies in a1's group.
    assert (first.version, first.size, wider.version, wider.size) == (1, 1, 2, 4)
    assert first.content_hash != wider.content_hash and len(first.content_hash) == 64
    assert first.slices == {"action_type": {"response": 1}, "source_format": {"openai": 1}, "owner": {"alice": 1}}
    assert first.trace_ids == ["a1"]
    with transaction(sessions) as session:
        versions = benchmarks.benchmarks(session)
        assert [(b.version, b.content_hash) for b in versions] == [(1, first.content_hash), (2, wider.content_hash)]
        assert [a.action for a in session.scalars(select(OperatorActionRow))].count("freeze_benchmark") == 2


def test_an_empty_or_overlapping_benchmark_is_refused_and_writes_nothing(sessions: sessionmaker[Session]) -> None:
    admit_all(sessions)
    with transaction(sessions) as session:
        benchmarks.freeze(session, "operator", "core", [group(TRACES[0])])

    with pytest.raises(FailedPrecondition, match="empty benchmark"), transaction(sessions) as session:
        benchmarks.freeze(session, "operator", "other", ["no-such-group"])
    with pytest.raises(InvalidArgument, match="at least one task group"), transaction(sessions) as session:
        benchmarks.freeze(session, "operator", "other", [])
    with pytest.raises(FailedPrecondition, match="belongs to benchmark core"), transaction(sessions) as session:
        benchmarks.freeze(session, "operator", "other", [group(TRACES[0]), group(TRACES[2])])

    with transaction(sessions) as session:
        assert session.scalar(select(func.count()).select_from(BenchmarkRow)) == 1


def test_a_snapshot_holds_out_every_benchmark_trace_and_task_group(
    sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    # a3 is another trace of a1's task: held out with it although it is in no benchmark.
    admit_all(sessions, [*TRACES, rated_trace("alice", "a3", "Refund  1")])
    objects = objects_in(tmp_path)
    with transaction(sessions) as session:
        benchmarks.freeze(session, "operator", "core", [group(TRACES[0])])
    with transaction(sessions) as session:
        snapshot = benchmarks.take_snapshot(session, objects, "operator")

    lines = [json.loads(line) for line in objects.get(snapshot.object_key).decode().splitlines()]
    assert sorted(trace for line in lines for trace in line["trace_ids"]) == ["a2", "b1"]
    assert (snapshot.size, snapshot.held_out) == (2, 8)
    assert all(line["input_version"] == 2 and line["chosen"].startswith("System:") for line in lines)


def test_a_revoked_account_is_in_no_later_snapshot_or_benchmark(
    sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    admit_all(sessions)
    with transaction(sessions) as session:
        consent.revoke(session, "bob", "bob")
    with transaction(sessions) as session:
        snapshot = benchmarks.take_snapshot(session, objects_in(tmp_path), "operator")
        assert snapshot.size == 4
        with pytest.raises(FailedPrecondition, match="empty benchmark"):
            benchmarks.freeze(session, "operator", "bobs", [group(TRACES[2])])
        assert session.scalar(select(func.count()).select_from(ComparisonRow)) == 5


def test_an_empty_snapshot_is_refused_and_stores_nothing(sessions: sessionmaker[Session], tmp_path: Path) -> None:
    objects = objects_in(tmp_path)
    with pytest.raises(FailedPrecondition, match="empty snapshot"), transaction(sessions) as session:
        benchmarks.take_snapshot(session, objects, "operator")

    with transaction(sessions) as session:
        assert session.scalar(select(func.count()).select_from(SnapshotRow)) == 0
    assert not (tmp_path / "objects").exists() or not any((tmp_path / "objects").rglob("*.jsonl"))
