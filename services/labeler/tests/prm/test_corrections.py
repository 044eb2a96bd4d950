"""CourseCorrection: the prompt block, a stable fingerprint, lossless round trips and the per-task cap."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from stash_labeler.prm.corrections import SUGGESTIONS, CourseCorrection, next_correction
from stash_labeler.prm.patterns import PATTERN_NAMES, Pattern

AT = datetime(2026, 5, 9, 10, 30, tzinfo=UTC)


def test_every_pattern_has_a_suggestion_that_fits_the_ledger_limit() -> None:
    assert set(SUGGESTIONS) == set(PATTERN_NAMES)
    assert all(0 < len(text) <= 500 for text in SUGGESTIONS.values())


def test_from_pattern_fills_taxonomy_suggestion_fingerprint_and_prompt_block() -> None:
    correction = CourseCorrection.from_pattern("task-7", Pattern(name="expansion_drift"), created_at=AT)
    assert correction.task_id == "task-7"
    assert (correction.taxonomy, correction.pattern) == ("specification_error", "expansion_drift")
    assert correction.suggestion == SUGGESTIONS["expansion_drift"]
    assert correction.fingerprint == "specification_error:expansion_drift"
    assert correction.prompt_block == (
        "## COURSE CORRECTION\n\n"
        "specification_error: expansion_drift\n\n"
        f"Suggested adjustment: {SUGGESTIONS['expansion_drift']}\n"
    )
    assert correction.created_at == AT


def test_from_pattern_stamps_the_current_time_by_default() -> None:
    before = datetime.now(UTC)
    correction = CourseCorrection.from_pattern("task-7", Pattern(name="ping_pong"))
    assert before <= correction.created_at <= datetime.now(UTC)


@pytest.mark.parametrize("name", PATTERN_NAMES)
def test_round_trip_is_lossless(name: str) -> None:
    correction = CourseCorrection.from_pattern("task-7", Pattern(name=name), created_at=AT)  # type: ignore[arg-type]
    dumped = correction.model_dump()
    assert dumped["fingerprint"] == correction.fingerprint
    assert dumped["prompt_block"] == correction.prompt_block
    assert CourseCorrection.model_validate(dumped) == correction
    assert CourseCorrection.model_validate_json(correction.model_dump_json()) == correction
    assert CourseCorrection.model_validate_json(correction.model_dump_json()).model_dump() == dumped


def test_fingerprint_is_the_same_for_every_task_time_and_ml_confidence() -> None:
    first = CourseCorrection.from_pattern("task-1", Pattern(name="stuck_on_test"), created_at=AT)
    later = CourseCorrection.from_pattern(
        "task-2", Pattern(name="stuck_on_test", source="ml", confidence=0.9), created_at=datetime.now(UTC)
    )
    assert first.fingerprint == later.fingerprint == "coordination_error:stuck_on_test"


def test_a_naive_created_at_is_rejected() -> None:
    with pytest.raises(ValidationError, match="created_at"):
        CourseCorrection.from_pattern("task-1", Pattern(name="ping_pong"), created_at=datetime(2026, 5, 9))


def test_next_correction_takes_the_most_severe_pattern_not_yet_emitted() -> None:
    patterns = [Pattern(name="repetition_loop"), Pattern(name="context_thrash"), Pattern(name="ping_pong")]
    first = next_correction("task-1", patterns, emitted=set(), created_at=AT)
    assert first is not None and first.pattern == "context_thrash"
    second = next_correction("task-1", patterns, emitted={"coordination_error:context_thrash"}, created_at=AT)
    assert second is not None and second.pattern == "ping_pong"


def test_next_correction_returns_none_when_everything_was_emitted_or_nothing_matched() -> None:
    patterns = [Pattern(name="ping_pong")]
    assert next_correction("task-1", patterns, emitted={"reasoning_error:ping_pong"}) is None
    assert next_correction("task-1", [], emitted=set()) is None


def test_pattern_round_trip_carries_its_derived_taxonomy_and_severity() -> None:
    pattern = Pattern(name="context_thrash", source="ml", confidence=0.8)
    dumped = pattern.model_dump()
    assert dumped == {
        "name": "context_thrash",
        "source": "ml",
        "confidence": 0.8,
        "taxonomy": "coordination_error",
        "severity": 3,
    }
    assert Pattern.model_validate(dumped) == pattern
    with pytest.raises(ValidationError, match="name"):
        Pattern.model_validate({"name": "yak_shaving"})
