"""Independent review: named reviewers only, never one's own, once each, agreement admits, disagreement kept."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from stash_common.db import transaction
from stash_common.errors import AlreadyExists, InvalidArgument, PermissionDenied
from stash_trainer.evaluator import consent, review
from stash_trainer.evaluator.collection import collect
from stash_trainer.evaluator.store import ComparisonRow, ReviewRow
from support.evaluator import MemoryReader, rated_trace


def seed(sessions: sessionmaker[Session], *reviewers: str) -> str:
    """Alice's one consented comparison (she rated both actions) and the named reviewers; its id."""
    with transaction(sessions) as session:
        consent.grant(session, "alice", "alice", "v1", None, set())
        collect(session, MemoryReader([rated_trace("alice", "a1", "refund 1")]), "operator")
        for reviewer in ("alice", *reviewers):
            review.name_reviewer(session, "operator", reviewer)
        return session.scalars(select(ComparisonRow.id)).one()


def better_of(comparison_id: str, reviewer: str, candidate_is_better: bool) -> str:
    """The verdict on A that says the candidate's chosen action is (or is not) the better one."""
    return "better" if review.a_is_chosen(comparison_id, reviewer) == candidate_is_better else "worse"


def test_the_queue_hides_the_origin_and_never_shows_an_author_their_own(sessions: sessionmaker[Session]) -> None:
    comparison_id = seed(sessions, "carol")
    with transaction(sessions) as session:
        own = review.queue(session, "alice", 10)
        (item,) = review.queue(session, "carol", 10)

    assert own == []
    assert item.comparison_id == comparison_id
    assert {item.action_a, item.action_b} == {
        "Assistant: Sorry, refunding order 1128 now.",
        "Assistant: Your refund for order 1182 is on its way.",
    }
    assert item.context_a.startswith("System: You are a support agent.")


def test_a_and_b_are_in_an_order_drawn_per_comparison_and_reviewer(sessions: sessionmaker[Session]) -> None:
    comparison_id = seed(sessions)
    # Comparison ids are random: pick a reviewer who draws the candidate's choice first and one who draws it second.
    names = [f"reviewer-{n}" for n in range(64)]
    first = next(name for name in names if review.a_is_chosen(comparison_id, name))
    second = next(name for name in names if not review.a_is_chosen(comparison_id, name))
    with transaction(sessions) as session:
        for name in (first, second):
            review.name_reviewer(session, "operator", name)
    with transaction(sessions) as session:
        row = session.get(ComparisonRow, comparison_id)
        assert row is not None
        assert review.queue(session, first, 10)[0].action_a == row.chosen["action"]
        assert review.queue(session, second, 10)[0].action_a == row.rejected["action"]
    draws = [review.a_is_chosen(f"comparison-{n}", "carol") for n in range(200)]
    assert 70 < sum(draws) < 130  # a fair coin, not a fixed side


def test_only_named_reviewers_review(sessions: sessionmaker[Session]) -> None:
    comparison_id = seed(sessions)
    with pytest.raises(PermissionDenied, match="only evaluator reviewers"), transaction(sessions) as session:
        review.record_review(session, "mallory", comparison_id, "better", None)


def test_reviewing_ones_own_comparison_or_twice_is_refused_and_writes_nothing(
    sessions: sessionmaker[Session],
) -> None:
    comparison_id = seed(sessions, "carol")
    with pytest.raises(PermissionDenied, match="independent review"), transaction(sessions) as session:
        review.record_review(session, "alice", comparison_id, "better", None)
    with transaction(sessions) as session:
        review.record_review(session, "carol", comparison_id, "better", "clear")
    with (
        pytest.raises(AlreadyExists, match="each reviewer reviews a comparison once"),
        transaction(sessions) as session,
    ):
        review.record_review(session, "carol", comparison_id, "worse", None)

    with transaction(sessions) as session:
        assert session.scalar(select(func.count()).select_from(ReviewRow)) == 1
        assert review.queue(session, "carol", 10) == []


def test_an_unknown_verdict_names_the_choices(sessions: sessionmaker[Session]) -> None:
    comparison_id = seed(sessions, "carol")
    with pytest.raises(InvalidArgument, match="better, worse, tie, invalid"), transaction(sessions) as session:
        review.record_review(session, "carol", comparison_id, "maybe", None)


def test_agreeing_reviews_admit_a_comparison(sessions: sessionmaker[Session]) -> None:
    comparison_id = seed(sessions, "carol", "dave")
    with transaction(sessions) as session:
        review.record_review(session, "carol", comparison_id, better_of(comparison_id, "carol", True), None)
        assert review.admitted(session) == []
        review.record_review(session, "dave", comparison_id, better_of(comparison_id, "dave", True), None)

    with transaction(sessions) as session:
        ((row, confirmed),) = review.admitted(session)
        assert (row.id, confirmed) == (comparison_id, True)
        assert review.stats(session)["by_status"]["admitted"] == 1


def test_a_disagreement_is_kept_and_reported(sessions: sessionmaker[Session]) -> None:
    comparison_id = seed(sessions, "carol", "dave")
    with transaction(sessions) as session:
        review.set_agreeing_reviews(session, "operator", 1)
        review.record_review(session, "carol", comparison_id, better_of(comparison_id, "carol", True), None)
        review.record_review(session, "dave", comparison_id, better_of(comparison_id, "dave", False), "the first")

    with transaction(sessions) as session:
        (dispute,) = review.disagreements(session)
        assert review.admitted(session) == []
    assert dispute["comparison_id"] == comparison_id
    assert sorted((r["reviewer_id"], r["verdict"], r["note"]) for r in dispute["reviews"]) == [
        ("carol", "confirms", None),
        ("dave", "reverses", "the first"),
    ]


def test_a_revoked_consent_leaves_the_queue(sessions: sessionmaker[Session]) -> None:
    seed(sessions, "carol")
    with transaction(sessions) as session:
        consent.revoke(session, "alice", "alice")

    with transaction(sessions) as session:
        assert review.queue(session, "carol", 10) == []
        assert review.stats(session)["comparisons"] == 0
