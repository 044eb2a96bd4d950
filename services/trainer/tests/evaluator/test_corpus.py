"""Candidate comparisons: consented traces only, input version 2, three preference sources, provenance and authors."""

from __future__ import annotations

from stash_trainer.evaluator.consent import Scope
from stash_trainer.evaluator.corpus import build_candidates, task_group
from support.evaluator import correction, rating, support_trace

ALL = {"alice": Scope("alice", None)}


def test_an_account_without_consent_contributes_nothing() -> None:
    alice = support_trace("alice", "a1", annotations=[rating("a1", 6, 1, "alice"), rating("a1", 4, -1, "alice")])
    bob = support_trace("bob", "b1", annotations=[rating("b1", 6, 1, "bob"), rating("b1", 4, -1, "bob")])

    candidates = build_candidates([alice, bob], ALL)

    assert candidates
    assert {c.owner_id for c in candidates} == {"alice"}
    assert all("b1" not in c.trace_ids for c in candidates)


def test_a_source_scope_keeps_other_sources_out() -> None:
    rated = [rating("a1", 6, 1, "alice"), rating("a1", 4, -1, "alice")]
    inside = support_trace("alice", "a1", source="chosen", annotations=rated)
    outside = support_trace(
        "alice", "a2", source="other", annotations=[rating("a2", 6, 1, "alice"), rating("a2", 4, -1, "alice")]
    )

    candidates = build_candidates([inside, outside], {"alice": Scope("alice", frozenset({"chosen"}))})

    assert {c.trace_ids for c in candidates} == {("a1",)}


def test_explicit_ratings_pair_with_system_context_and_their_raters_as_authors() -> None:
    trace = support_trace("alice", "a1", annotations=[rating("a1", 6, 1, "carol"), rating("a1", 4, -1, "dave")])

    (candidate,) = build_candidates([trace], ALL)

    assert candidate.preference_source == "explicit"
    assert candidate.author_ids == ("carol", "dave")
    assert candidate.chosen.step_id == "a1:6" and candidate.rejected.step_id == "a1:4"
    assert candidate.chosen.context.startswith("System: You are a support agent.\n\nUser: I want a refund")
    assert candidate.rejected.action == "Assistant: Your refund for order 1182 is on its way."
    assert candidate.action_type == "response"
    assert candidate.task_groups == (task_group(trace.trace),)


def test_a_quoted_comment_rejects_its_action_for_the_next_repair() -> None:
    trace = support_trace("alice", "a1", annotations=[correction("a1", 4, "erin", "order 1182")])

    (candidate,) = build_candidates([trace], ALL)

    assert candidate.preference_source == "correction"
    assert (candidate.chosen.step_id, candidate.rejected.step_id) == ("a1:6", "a1:4")
    assert candidate.author_ids == ("erin",)
    assert candidate.evidence == {"comment_id": "a1-c4", "comment": "wrong order", "quote": "order 1182"}


def test_label_error_flags_and_unquoted_comments_are_not_corrections() -> None:
    flagged = support_trace("alice", "a1", annotations=[correction("a1", 4, "erin", "order 1182", label_error=True)])
    unquoted = support_trace("alice", "a2", annotations=[correction("a2", 4, "erin", "")])

    assert build_candidates([flagged, unquoted], ALL) == []


def test_automatic_credit_pairs_are_authored_by_the_owner() -> None:
    trace = support_trace("alice", "a1", credits={4: -0.6, 6: 0.8})

    (candidate,) = build_candidates([trace], ALL)

    assert candidate.preference_source == "automatic"
    assert candidate.author_ids == ("alice",)
    assert candidate.evidence["chosen_credit"] == 0.8


def test_rebuilding_gives_the_same_keys_and_task_groups_ignore_case_and_spacing() -> None:
    first = support_trace("alice", "a1", request="Refund  order 1182", credits={4: -0.6, 6: 0.8})
    second = support_trace("alice", "a2", request="refund order 1182")

    assert [c.key for c in build_candidates([first], ALL)] == [c.key for c in build_candidates([first], ALL)]
    assert task_group(first.trace) == task_group(second.trace)
