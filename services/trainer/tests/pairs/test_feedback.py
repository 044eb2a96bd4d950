"""Feedback findings and AI preference pairs through the real openai client against the local provider stand-in."""

from __future__ import annotations

import json
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from itertools import combinations
from typing import Any

import openai
import pytest
from fakes.llm_server import FakeLLM

from stash_common.errors import InvalidArgument, Unavailable
from stash_common.rendering import render_action, render_example
from stash_trainer.pairs.feedback import (
    CRITERIA,
    ExtractionError,
    FeedbackExtractor,
    Finding,
    Review,
    Target,
    review_exclusion,
    sample_criteria,
)
from stash_trainer.pairs.inputs import Annotation, SourceTrace

MODEL = "judge-model"


def judgment(
    label: str = "unclear",
    confidence: str = "high",
    source: str = "ai_judgment",
    quote: str | None = None,
    alternative: str | None = None,
) -> dict[str, Any]:
    """A judgment as the model would answer it."""
    return {
        "label": label,
        "confidence": confidence,
        "source": source,
        "evidence_quote": quote,
        "reason": "Because.",
        "alternative": alternative,
    }


class ScriptedModel:
    """Answers judgments by target step and reviews by the original's step; measures requests in flight."""

    def __init__(
        self,
        traces: Sequence[SourceTrace],
        judgments: Mapping[int, dict[str, Any]],
        reviews: Mapping[int, str] | None = None,
        delay: float = 0.0,
    ) -> None:
        self.originals = {render_action(s): s.index for t in traces for s in t.steps if s.is_action}
        self.judgments = judgments
        self.reviews = reviews or {}
        self.delay = delay
        self.in_flight = 0
        self.most_in_flight = 0
        self._lock = threading.Lock()

    def __call__(self, _path: str, body: dict[str, Any]) -> str:
        with self._lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            time.sleep(self.delay)
            prompt = body["messages"][-1]["content"]
            if body["response_format"]["json_schema"]["name"] == "feedback_judgment":
                return json.dumps(self.judgments.get(_target_index(prompt), judgment()))
            return self._review(prompt)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _review(self, prompt: str) -> str:
        first, second = re.search(r"Candidate A:\n(.*)\n\nCandidate B:\n(.*)\n\nCriteria:", prompt, re.S).groups()
        index = self.originals.get(first, self.originals.get(second))
        verdict = self.reviews.get(index, "agree")
        if verdict in ("tie", "unsupported"):
            return json.dumps(
                {"preferred": "tie" if verdict == "tie" else "A", "supported": verdict == "tie", "reason": "r"}
            )
        label = self.judgments[index]["label"]
        wanted = verdict if verdict != "agree" else "original" if label == "positive" else "alternative"
        original_letter = "A" if first in self.originals else "B"
        letter = original_letter if wanted == "original" else "B" if original_letter == "A" else "A"
        return json.dumps({"preferred": letter, "supported": True, "reason": "r"})


def _target_index(prompt: str) -> int:
    return int(re.search(r"Target \(step (\d+),", prompt).group(1))


def _extractor(fake_llm: FakeLLM, rubric_dropout: float = 0.5) -> FeedbackExtractor:
    client = openai.OpenAI(api_key="test-key", base_url=fake_llm.url + "/v1", max_retries=0)
    return FeedbackExtractor(client, MODEL, rubric_dropout=rubric_dropout)


def _requests(fake_llm: FakeLLM, name: str) -> list[dict[str, Any]]:
    return [body for _, body in fake_llm.requests if body["response_format"]["json_schema"]["name"] == name]


def _prompt(body: dict[str, Any]) -> str:
    return body["messages"][-1]["content"]


def test_user_feedback_with_a_later_quote_produces_pairs(fake_llm: FakeLLM, make_trace, support_specs) -> None:
    trace = make_trace("t1", support_specs)
    fake_llm.reply = ScriptedModel(
        [trace],
        {
            4: judgment("negative", "high", "user_feedback", "the wrong order", "Which order should I refund?"),
            6: judgment("positive", "high", "user_feedback", "Thanks, that works!", "Refunding now."),
        },
    )

    extraction = _extractor(fake_llm).extract([trace])

    asked = replace(trace.steps[4], content="Which order should I refund?")
    weaker = replace(trace.steps[6], content="Refunding now.")
    assert [(p.chosen, p.rejected) for p in extraction.pairs] == [
        (render_example(trace.steps, 4, asked), render_example(trace.steps, 4)),
        (render_example(trace.steps, 6), render_example(trace.steps, 6, weaker)),
    ]
    assert [(p.granularity, p.action_type, p.trace_ids) for p in extraction.pairs] == [
        ("action", "response", ("t1",))
    ] * 2
    reports = [finding.report(finding.pair_exclusion) for finding in extraction.findings]
    assert [(r["step_index"], r["label"], r["source"], r["evidence_id"]) for r in reports] == [
        (2, "unclear", "ai_judgment", "t1:2"),
        (4, "negative", "user_feedback", "t1:5"),
        (6, "positive", "user_feedback", "t1:7"),
    ]
    assert reports[1]["evidence_quote"] == "the wrong order"
    assert reports[1]["classifier_model"] == MODEL
    assert reports[1]["alternative_action"] == "Assistant: Which order should I refund?"
    assert [r["pair_exclusion"] for r in reports] == ["the label is unclear", None, None]
    assert extraction.pairs[0].evidence["evidence_id"] == "t1:5"


def test_calls_are_schema_constrained_and_see_only_citable_feedback(
    fake_llm: FakeLLM, make_trace, support_specs
) -> None:
    trace = make_trace("t1", support_specs)
    fake_llm.reply = ScriptedModel(
        [trace], {4: judgment("negative", "high", "ai_judgment", None, "Let me check 1182.")}
    )

    _extractor(fake_llm).extract([trace])

    judged = {_target_index(_prompt(body)): body for body in _requests(fake_llm, "feedback_judgment")}
    (reviewed,) = _requests(fake_llm, "comparison_review")
    assert sorted(judged) == [2, 4, 6]
    assert judged[4]["response_format"]["json_schema"]["strict"] is True
    assert judged[4]["model"] == MODEL
    assert "That is the wrong order" in _prompt(judged[4]) and "Thanks, that works" not in _prompt(judged[4])
    assert "That is the wrong order" not in _prompt(judged[6]).split("Feedback on the target")[1]
    assert "wrong order" not in _prompt(reviewed) and "Thanks" not in _prompt(reviewed)
    assert all("support agent" not in json.dumps(body["messages"]) for _, body in fake_llm.requests)


def test_a_quote_found_nowhere_fails_the_extraction_naming_the_step(
    fake_llm: FakeLLM, make_trace, support_specs
) -> None:
    trace = make_trace("t1", support_specs)
    fake_llm.reply = ScriptedModel([trace], {4: judgment("negative", "high", "user_feedback", "You are useless")})

    with pytest.raises(ExtractionError, match=r"^trace t1 step 4: the evidence quote 'You are useless' does not occur"):
        _extractor(fake_llm).extract([trace])


@pytest.mark.parametrize("quote", ["That is the wrong order", "I want a refund for order 1182"])
def test_evidence_from_an_earlier_message_is_refused(fake_llm: FakeLLM, make_trace, support_specs, quote: str) -> None:
    trace = make_trace("t1", support_specs)
    fake_llm.reply = ScriptedModel([trace], {6: judgment("negative", "high", "user_feedback", quote, "Refund 1182.")})

    with pytest.raises(ExtractionError, match="^trace t1 step 6: the evidence quote"):
        _extractor(fake_llm).extract([trace])


def test_a_comment_on_the_step_is_citable_unless_flagged(fake_llm: FakeLLM, make_trace, support_specs) -> None:
    comment = Annotation("c1", "t1:4", None, "Refunded the wrong order", False, "henry")
    flagged = Annotation("c2", "t1:6", None, "Should have apologised more", True, "henry")
    trace = make_trace("t1", support_specs, annotations=[comment, flagged])
    fake_llm.reply = ScriptedModel(
        [trace],
        {
            4: judgment("negative", "low", "user_feedback", "the wrong order", None),
            6: judgment("negative", "low", "user_feedback", "apologised more", None),
        },
    )

    with pytest.raises(ExtractionError, match="^trace t1 step 6"):
        _extractor(fake_llm).extract([trace])

    fake_llm.reply = ScriptedModel([trace], {4: judgment("negative", "low", "user_feedback", "Refunded the wrong")})
    (finding,) = [f for f in _extractor(fake_llm).extract([trace]).findings if f.target.step.index == 4]
    assert (finding.evidence_id, finding.evidence_quote) == ("c1", "Refunded the wrong")
    assert finding.evidence_author == "henry" == finding.report(True)["evidence_author"]


@pytest.mark.parametrize(
    ("answer", "exclusion"),
    [
        (judgment("unclear", "high", "ai_judgment", None, "Sure."), "the label is unclear"),
        (judgment("negative", "low", "user_feedback", "the wrong order", "Which order?"), "the confidence is low"),
        (judgment("negative", "high", "user_feedback", "the wrong order", None), "no alternative was written"),
    ],
)
def test_unclear_low_confidence_or_missing_alternative_is_a_finding_without_a_pair(
    fake_llm: FakeLLM, make_trace, support_specs, answer: dict[str, Any], exclusion: str
) -> None:
    trace = make_trace("t1", support_specs)
    fake_llm.reply = ScriptedModel([trace], {4: answer})

    extraction = _extractor(fake_llm).extract([trace])

    assert extraction.pairs == []
    assert _report(extraction.findings[1])["pair_exclusion"] == exclusion
    assert _requests(fake_llm, "comparison_review") == []


def test_an_ai_judgment_carries_a_code_selected_excerpt_of_the_target(fake_llm: FakeLLM, make_trace) -> None:
    long_answer = "Your refund is on its way. " * 30
    trace = make_trace("t1", [("user", "Refund order 1182"), ("assistant", long_answer)])
    fake_llm.reply = ScriptedModel(
        [trace], {1: judgment("positive", "high", "ai_judgment", "the user loved it", "Ok.")}
    )

    (finding,) = _extractor(fake_llm).extract([trace]).findings

    assert finding.evidence_id == "t1:1"
    assert finding.evidence_quote == render_action(trace.steps[1])[:299] + "…"
    assert finding.pair is not None and finding.pair.evidence["source"] == "ai_judgment"


@pytest.mark.parametrize(
    ("alternative", "exclusion"),
    [
        (
            json.dumps({"tool_name": "lookup_order", "tool_input": {"order_id": "1182"}, "content": "Checking."}),
            "the alternative does not change the tool or its arguments",
        ),
        ("lookup_order(1128)", "the alternative is not a JSON {tool_name, tool_input, content} tool call"),
        (
            json.dumps({"tool_name": "lookup_order", "tool_input": {"order_id": "1128"}}),
            "the alternative is not a JSON {tool_name, tool_input, content} tool call",
        ),
    ],
)
def test_a_tool_call_alternative_must_change_the_tool_or_its_arguments(
    fake_llm: FakeLLM, make_trace, support_specs, alternative: str, exclusion: str
) -> None:
    trace = make_trace("t1", support_specs)
    fake_llm.reply = ScriptedModel([trace], {2: judgment("negative", "high", "ai_judgment", None, alternative)})

    extraction = _extractor(fake_llm).extract([trace])

    report = _report(extraction.findings[0])
    assert extraction.pairs == []
    assert (report["pair_exclusion"], report["label"], report["tool_name"]) == (exclusion, "negative", "lookup_order")
    assert report["action_type"] == "tool_call"


def test_a_tool_call_alternative_with_new_arguments_pairs_without_the_original_result(
    fake_llm: FakeLLM, make_trace, support_specs
) -> None:
    trace = make_trace("t1", support_specs)
    revision = {"tool_name": "lookup_order", "tool_input": {"order_id": "1128"}, "content": ""}
    fake_llm.reply = ScriptedModel(
        [trace], {2: judgment("negative", "high", "ai_judgment", None, json.dumps(revision))}
    )

    (pair,) = _extractor(fake_llm).extract([trace]).pairs

    assert pair.chosen == 'User: I want a refund for order 1182\n\nAssistant called lookup_order({"order_id": "1128"})'
    assert pair.rejected == render_example(trace.steps, 2)
    assert (pair.action_type, pair.granularity) == ("tool_call", "action")
    assert "delivered" not in pair.chosen


def test_a_response_alternative_that_repeats_the_original_produces_no_pair(
    fake_llm: FakeLLM, make_trace, support_specs
) -> None:
    trace = make_trace("t1", support_specs)
    same = " Sorry, refunding order 1128 now. "
    fake_llm.reply = ScriptedModel([trace], {6: judgment("positive", "high", "user_feedback", "Thanks", same)})

    extraction = _extractor(fake_llm).extract([trace])

    assert extraction.pairs == []
    assert extraction.findings[2].pair_exclusion == "the alternative repeats the original response"


@pytest.mark.parametrize(
    ("verdict", "exclusion"),
    [
        ("original", "the review preferred the original, reversing the negative label: r"),
        ("tie", "the review found a tie: r"),
        ("unsupported", "the review found the comparison unsupported by the prior context: r"),
    ],
)
def test_a_review_that_disagrees_produces_no_pair(
    fake_llm: FakeLLM, make_trace, support_specs, verdict: str, exclusion: str
) -> None:
    trace = make_trace("t1", support_specs)
    answer = judgment("negative", "high", "user_feedback", "the wrong order", "Which order?")
    fake_llm.reply = ScriptedModel([trace], {4: answer}, reviews={4: verdict})

    extraction = _extractor(fake_llm).extract([trace])

    assert extraction.pairs == []
    assert _report(extraction.findings[1])["pair_exclusion"] == exclusion
    assert _report(extraction.findings[1])["alternative_action"] == "Assistant: Which order?"


@pytest.mark.parametrize("original_first", [True, False])
def test_review_exclusion_reads_the_candidate_order(make_trace, support_specs, original_first: bool) -> None:
    trace = make_trace("t1", support_specs)
    target = Target(trace, trace.steps[4], CRITERIA[:2], original_first, ())
    original, alternative = ("A", "B") if original_first else ("B", "A")

    assert review_exclusion(Review(preferred=original, supported=True, reason="r"), target, "positive") is None
    assert review_exclusion(Review(preferred=alternative, supported=True, reason="r"), target, "negative") is None
    assert "reversing" in review_exclusion(
        Review(preferred=alternative, supported=True, reason="r"), target, "positive"
    )


def test_rubric_dropout_samples_two_criteria_recorded_in_the_reason(
    fake_llm: FakeLLM, make_trace, support_specs
) -> None:
    traces = [make_trace(f"t{number}", support_specs) for number in range(4)]
    answer = judgment("positive", "high", "ai_judgment", None, "A weaker answer.")
    fake_llm.reply = ScriptedModel(traces, {4: answer, 6: answer})

    first = _extractor(fake_llm).extract(traces, seed=7)
    again = _extractor(fake_llm).extract(traces, seed=7)
    other = _extractor(fake_llm).extract(traces, seed=8)

    chosen = [tuple(finding.target.criteria) for finding in first.findings]
    assert all(len(criteria) == 2 and set(criteria) <= set(CRITERIA) for criteria in chosen)
    assert len(set(chosen)) > 1
    assert [finding.report(None)["reason"] for finding in first.findings] == [
        f"Criteria: {', '.join(criteria)}. Because." for criteria in chosen
    ]
    assert [tuple(finding.target.criteria) for finding in again.findings] == chosen
    assert [tuple(finding.target.criteria) for finding in other.findings] != chosen
    for _, body in fake_llm.requests:
        assert re.search(r"\nCriteria: [a-z ]+, [a-z ]+$", _prompt(body))


def test_review_uses_the_criteria_of_its_judgment(fake_llm: FakeLLM, make_trace, support_specs) -> None:
    trace = make_trace("t1", support_specs)
    fake_llm.reply = ScriptedModel([trace], {4: judgment("positive", "high", "ai_judgment", None, "Weaker.")})

    (finding,) = [f for f in _extractor(fake_llm).extract([trace], seed=3).findings if f.pair is not None]

    (review,) = _requests(fake_llm, "comparison_review")
    assert _prompt(review).endswith(f"Criteria: {', '.join(finding.target.criteria)}")


def test_rubric_dropout_zero_uses_all_four_criteria(fake_llm: FakeLLM, make_trace, support_specs) -> None:
    trace = make_trace("t1", support_specs)
    fake_llm.reply = ScriptedModel([trace], {})

    extraction = _extractor(fake_llm, rubric_dropout=0).extract([trace])

    assert {finding.target.criteria for finding in extraction.findings} == {CRITERIA}
    assert all(_prompt(body).endswith(f"Criteria: {', '.join(CRITERIA)}") for _, body in fake_llm.requests)


def test_sample_criteria_draws_pairs_of_criteria_uniformly() -> None:
    draws = [sample_criteria(random.Random(f"0:t:{number}"), 0.5) for number in range(3000)]

    assert set(draws) == set(combinations(CRITERIA, 2))
    counts = Counter(criterion for draw in draws for criterion in draw)
    assert all(0.45 < counts[criterion] / len(draws) < 0.55 for criterion in CRITERIA)


def test_rubric_dropout_must_leave_a_criterion(fake_llm: FakeLLM) -> None:
    with pytest.raises(InvalidArgument, match="^rubric_dropout: must be at least 0 and below 1"):
        _extractor(fake_llm, rubric_dropout=1)


def test_at_most_three_calls_are_in_flight_per_trace(fake_llm: FakeLLM, make_trace) -> None:
    specs = [("user", "Check every order")] + [("call", "lookup_order", {"order_id": n}) for n in range(8)]
    traces = [make_trace("t1", specs), make_trace("t2", specs)]
    model = ScriptedModel(traces, {}, delay=0.2)
    fake_llm.reply = model

    extraction = _extractor(fake_llm).extract(traces)

    assert len(extraction.findings) == 16
    assert model.most_in_flight == 3


def test_human_rated_actions_are_not_assessed(fake_llm: FakeLLM, make_trace, support_specs) -> None:
    trace = make_trace("t1", support_specs, ratings={4: -1})
    fake_llm.reply = ScriptedModel([trace], {})

    extraction = _extractor(fake_llm).extract([trace])

    assert [finding.target.step.index for finding in extraction.findings] == [2, 6]
    assert sorted(_target_index(_prompt(body)) for body in _requests(fake_llm, "feedback_judgment")) == [2, 6]


def test_a_malformed_answer_fails_the_extraction(fake_llm: FakeLLM, make_trace, support_specs) -> None:
    fake_llm.reply = lambda _path, _body: json.dumps({"label": "great"})

    with pytest.raises(
        ExtractionError, match=r"^trace t1 step \d: malformed feedback_judgment: label: Input should be"
    ):
        _extractor(fake_llm).extract([make_trace("t1", support_specs)])


def test_a_provider_failure_is_unavailable(fake_llm: FakeLLM, make_trace, support_specs) -> None:
    fake_llm.fail_status = 500

    with pytest.raises(Unavailable, match=r"^trace t1 step \d: the feedback model failed"):
        _extractor(fake_llm).extract([make_trace("t1", support_specs)])


def test_extraction_stops_after_the_trace_that_reaches_max_pairs(fake_llm: FakeLLM, make_trace, support_specs) -> None:
    traces = [make_trace("t1", support_specs), make_trace("t2", support_specs)]
    fake_llm.reply = ScriptedModel(traces, {6: judgment("positive", "high", "user_feedback", "Thanks", "Done.")})

    extraction = _extractor(fake_llm).extract(traces, max_pairs=1)

    assert {finding.target.trace.id for finding in extraction.findings} == {"t1"}
    assert len(extraction.pairs) == 1


def _report(finding: Finding) -> dict[str, Any]:
    """The finding's report item as extraction alone decides it."""
    return finding.report(finding.pair_exclusion)
