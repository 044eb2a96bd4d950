"""The LLM trajectory classifier, its defensive answer parser, and the rules-first merge."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stash_labeler.prm.classifier import (
    LLMTrajectoryClassifier,
    build_classify_prompt,
    merge_patterns,
    parse_classify_response,
)
from stash_labeler.prm.config import PRMConfig
from stash_labeler.prm.events import TrajectoryEvent
from stash_labeler.prm.patterns import PATTERN_NAMES, Pattern

START = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
EVENTS = [
    TrajectoryEvent(START, "agent", "edit", ("src/app.py",), True, 2.0),
    TrajectoryEvent(START, "agent", "test", ("tests/test_app.py",), False, 12.5),
    TrajectoryEvent(START, "agent", "test", (), False, 11.0),
]


class Completer:
    """A stub LLM: records prompts and answers with a fixed text, or raises."""

    def __init__(self, answer: str = "", error: Exception | None = None) -> None:
        self.answer = answer
        self.error = error
        self.prompts: list[str] = []

    async def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        if self.error is not None:
            raise self.error
        return self.answer


def classify(completer: Completer, events: list[TrajectoryEvent] = EVENTS, **options: float) -> list[Pattern]:
    return asyncio.run(LLMTrajectoryClassifier(completer, **options).classify(events))  # type: ignore[arg-type]


# --- classify ---------------------------------------------------------------------------------


def test_classify_skips_the_call_below_min_events() -> None:
    completer = Completer('{"patterns": [{"name": "stuck_on_test", "confidence": 0.9}]}')
    assert classify(completer, EVENTS[:2], min_events=3) == []
    assert completer.prompts == []


def test_classify_returns_ml_patterns_from_a_json_answer() -> None:
    completer = Completer('{"patterns": [{"name": "stuck_on_test", "confidence": 0.85}]}')
    assert classify(completer) == [Pattern(name="stuck_on_test", source="ml", confidence=0.85)]
    assert len(completer.prompts) == 1


def test_classify_falls_back_to_regex_on_malformed_json() -> None:
    answer = 'Sure! {"patterns": [{"name": "ping_pong", "confidence": 0.8}, {"name": "stuck_on_test", "confidence": 0.9'
    names = [(pattern.name, pattern.confidence) for pattern in classify(Completer(answer))]
    assert names == [("stuck_on_test", 0.9), ("ping_pong", 0.8)]


@pytest.mark.parametrize("error", [RuntimeError("rate limited"), TimeoutError(), ValueError("bad key")])
def test_classify_returns_nothing_when_the_completer_raises(error: Exception) -> None:
    completer = Completer(error=error)
    assert classify(completer) == []
    assert len(completer.prompts) == 1


def test_classify_returns_nothing_for_an_answer_that_is_not_text() -> None:
    completer = Completer()
    completer.answer = None  # type: ignore[assignment]
    assert classify(completer) == []


def test_classify_drops_unknown_names_and_low_confidences() -> None:
    answer = (
        '{"patterns": [{"name": "stuck_on_test", "confidence": 0.69}, {"name": "infinite_yak_shave", '
        '"confidence": 0.99}, {"name": "ping_pong", "confidence": 0.7}]}'
    )
    assert [pattern.name for pattern in classify(Completer(answer), threshold=0.7)] == ["ping_pong"]


def test_from_config_takes_threshold_and_min_events() -> None:
    classifier = LLMTrajectoryClassifier.from_config(Completer(), PRMConfig(ml_threshold=0.9, ml_min_events=5))
    assert (classifier.threshold, classifier.min_events) == (0.9, 5)


@pytest.mark.parametrize(("options", "message"), [({"threshold": 1.2}, "threshold"), ({"min_events": 0}, "min_events")])
def test_invalid_settings_are_rejected(options: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LLMTrajectoryClassifier(Completer(), **options)  # type: ignore[arg-type]


def test_prompt_lists_every_pattern_name_and_every_event() -> None:
    prompt = build_classify_prompt(EVENTS, 0.75)
    assert all(name in prompt for name in PATTERN_NAMES)
    assert "1. [agent:edit] files=src/app.py ok=true duration=2.0s" in prompt
    assert "2. [agent:test] files=tests/test_app.py ok=false duration=12.5s" in prompt
    assert "3. [agent:test] files=- ok=false duration=11.0s" in prompt
    assert ">= 0.75" in prompt


# --- parse_classify_response ------------------------------------------------------------------


def test_parse_reads_strict_json() -> None:
    answer = (
        '{"patterns": [{"name": "repetition_loop", "confidence": 1}, {"name": "expansion_drift", "confidence": 0.8}]}'
    )
    patterns = parse_classify_response(answer, 0.7)
    assert [(p.name, p.confidence, p.source) for p in patterns] == [
        ("expansion_drift", 0.8, "ml"),
        ("repetition_loop", 1.0, "ml"),
    ]


def test_parse_finds_the_json_object_among_prose() -> None:
    answer = (
        'I looked at it {carefully}.\n{"patterns": [{"name": "context_thrash", "confidence": 0.95}]}\nHope it helps {x}'
    )
    assert [pattern.name for pattern in parse_classify_response(answer, 0.7)] == ["context_thrash"]


def test_parse_skips_json_objects_without_a_patterns_list() -> None:
    answer = '{"thinking": "two files"} then {"patterns": [{"name": "ping_pong", "confidence": 0.9}]}'
    assert [pattern.name for pattern in parse_classify_response(answer, 0.7)] == ["ping_pong"]


def test_parse_trusts_an_empty_json_list_over_names_in_prose() -> None:
    assert parse_classify_response('No stuck_on_test: 0.9 here. {"patterns": []}', 0.7) == []


def test_parse_reads_name_confidence_pairs_without_json() -> None:
    answer = "stuck_on_test: 0.92\nping_pong = 0.4\nrepetition_loop: '0.75'\nunknown_thing: 0.99"
    patterns = parse_classify_response(answer, 0.7)
    assert [(p.name, p.confidence) for p in patterns] == [("stuck_on_test", 0.92), ("repetition_loop", 0.75)]


@pytest.mark.parametrize(
    "answer",
    [
        "",
        "   ",
        "no patterns",
        '{"patterns": "stuck_on_test"}',
        '{"patterns": [{"name": "stuck_on_test"}]}',
        '{"patterns": [{"name": "stuck_on_test", "confidence": "high"}]}',
        '{"patterns": [{"name": "stuck_on_test", "confidence": true}]}',
        '{"patterns": [{"name": "stuck_on_test", "confidence": 1.5}]}',
        '{"patterns": [{"name": ["stuck_on_test"], "confidence": 0.9}]}',
        '{"patterns": ["stuck_on_test", 0.9, null]}',
    ],
)
def test_parse_yields_nothing_for_empty_or_unusable_answers(answer: str) -> None:
    assert parse_classify_response(answer, 0.7) == []


def test_parse_keeps_the_first_confident_mention_of_a_name() -> None:
    answer = json.dumps({"patterns": [{"name": "ping_pong", "confidence": c} for c in (0.5, 0.8, 0.99)]})
    assert parse_classify_response(answer, 0.7) == [Pattern(name="ping_pong", source="ml", confidence=0.8)]


def test_parse_accepts_numeric_text_confidences_at_the_threshold() -> None:
    answer = '{"patterns": [{"name": "expansion_drift", "confidence": "0.7"}]}'
    assert parse_classify_response(answer, 0.7) == [Pattern(name="expansion_drift", source="ml", confidence=0.7)]


@given(st.text())
def test_parse_never_raises_on_any_text(answer: str) -> None:
    assert all(pattern.name in PATTERN_NAMES for pattern in parse_classify_response(answer, 0.5))


entries = st.fixed_dictionaries(
    {
        "name": st.one_of(st.sampled_from([*PATTERN_NAMES, "made_up"]), st.integers(), st.none()),
        "confidence": st.one_of(st.floats(allow_nan=True), st.sampled_from(["high", "", "n/a"]), st.booleans()),
    }
)


@given(st.lists(entries, max_size=8), st.floats(0, 1), st.text(max_size=20))
def test_parse_keeps_the_first_confident_entry_of_each_known_name(
    answer_entries: list[dict[str, object]], threshold: float, prose: str
) -> None:
    answer = prose.replace("{", "") + json.dumps({"patterns": answer_entries})
    expected: dict[object, float] = {}
    for entry in answer_entries:
        name, confidence = entry["name"], entry["confidence"]
        if name in PATTERN_NAMES and isinstance(confidence, float) and threshold <= confidence <= 1.0:
            expected.setdefault(name, confidence)
    patterns = parse_classify_response(answer, threshold)
    assert {pattern.name: pattern.confidence for pattern in patterns} == expected
    assert {pattern.source for pattern in patterns} <= {"ml"}


# --- merge_patterns ---------------------------------------------------------------------------


def test_merge_keeps_the_rule_pattern_when_both_found_it() -> None:
    rules = [Pattern(name="ping_pong")]
    ml = [
        Pattern(name="ping_pong", source="ml", confidence=0.99),
        Pattern(name="stuck_on_test", source="ml", confidence=0.8),
    ]
    merged = merge_patterns(rules, ml)
    assert merged == [Pattern(name="stuck_on_test", source="ml", confidence=0.8), Pattern(name="ping_pong")]


def test_merge_sorts_by_severity() -> None:
    rules = [Pattern(name="repetition_loop"), Pattern(name="context_thrash")]
    ml = [
        Pattern(name="ping_pong", source="ml", confidence=0.9),
        Pattern(name="expansion_drift", source="ml", confidence=0.9),
    ]
    assert [p.name for p in merge_patterns(rules, ml)] == [
        "expansion_drift",
        "context_thrash",
        "ping_pong",
        "repetition_loop",
    ]


def test_merge_of_nothing_is_nothing_and_rules_alone_are_unchanged() -> None:
    assert merge_patterns([], []) == []
    rules = [Pattern(name="stuck_on_test"), Pattern(name="repetition_loop")]
    assert merge_patterns(rules, []) == rules
