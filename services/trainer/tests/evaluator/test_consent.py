"""Consent: off by default, all traces or owned sources, recorded, revocable, enforced where data is selected."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from stash_common.db import transaction
from stash_common.errors import InvalidArgument, NotFound
from stash_trainer.evaluator import consent
from stash_trainer.evaluator.collection import collect
from stash_trainer.evaluator.store import ComparisonRow, ConsentRow, OperatorActionRow
from support.evaluator import MemoryReader, rated_trace


def test_no_account_consents_by_default(sessions: sessionmaker[Session]) -> None:
    with transaction(sessions) as session:
        assert consent.consented_scopes(session) == {}
        assert consent.open_consent(session, "alice") is None


def test_a_consent_records_who_when_and_the_text_version(sessions: sessionmaker[Session]) -> None:
    with transaction(sessions) as session:
        consent.grant(session, "alice", "alice", "v1", ["src-1"], {"src-1", "src-2"})

    with transaction(sessions) as session:
        row = consent.open_consent(session, "alice")
        assert row is not None
        assert (row.granted_by, row.text_version, row.source_ids) == ("alice", "v1", ["src-1"])
        assert row.granted_at is not None
        assert consent.consented_scopes(session)["alice"].covers("alice", "src-1")
        assert not consent.consented_scopes(session)["alice"].covers("alice", "src-2")


def test_consenting_for_a_source_one_does_not_own_writes_nothing(sessions: sessionmaker[Session]) -> None:
    with pytest.raises(InvalidArgument, match="source theirs is not yours"), transaction(sessions) as session:
        consent.grant(session, "alice", "alice", "v1", ["src-1", "theirs"], {"src-1"})

    with transaction(sessions) as session:
        assert session.scalar(select(func.count()).select_from(ConsentRow)) == 0


def test_revoking_closes_the_consent_and_keeps_its_history(sessions: sessionmaker[Session]) -> None:
    with transaction(sessions) as session:
        consent.grant(session, "alice", "alice", "v1", None, set())
        consent.grant(session, "alice", "alice", "v2", None, set())
    with transaction(sessions) as session:
        consent.revoke(session, "alice", "alice")

    with transaction(sessions) as session:
        history = consent.history(session, "alice")
        assert [row.text_version for row in history] == ["v2", "v1"]
        assert all(row.revoked_at is not None and row.revoked_by == "alice" for row in history)
        assert consent.stopped_at(session, "alice") == history[0].revoked_at
        assert consent.consented_scopes(session) == {}
    with pytest.raises(NotFound, match="no open consent"), transaction(sessions) as session:
        consent.revoke(session, "alice", "alice")


def test_collecting_never_reads_a_non_consenting_account(sessions: sessionmaker[Session]) -> None:
    reader = MemoryReader([rated_trace("alice", "a1", "refund 1"), rated_trace("bob", "b1", "refund 2")])
    with transaction(sessions) as session:
        consent.grant(session, "alice", "alice", "v1", None, set())
        added = collect(session, reader, "operator")

    with transaction(sessions) as session:
        owners = set(session.scalars(select(ComparisonRow.owner_id)))
        action = session.scalars(select(OperatorActionRow)).one()
    assert added == 1
    assert owners == {"alice"}
    assert reader.asked == ["alice"]
    assert (action.actor_id, action.action, action.details) == (
        "operator",
        "collect_corpus",
        {"accounts": 1, "added": 1},
    )


def test_collecting_twice_adds_nothing_new(sessions: sessionmaker[Session]) -> None:
    reader = MemoryReader([rated_trace("alice", "a1", "refund 1")])
    with transaction(sessions) as session:
        consent.grant(session, "alice", "alice", "v1", None, set())
        collect(session, reader, "operator")
    with transaction(sessions) as session:
        assert collect(session, reader, "operator") == 0
