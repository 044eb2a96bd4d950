"""The classifier evaluation suites through the real openai client against the local provider stand-in."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from fakes.llm_server import FakeLLM

from stash_common.rendering import render_action
from stash_trainer.classifier_eval import FEEDBACK_CASES, LEARNING_CASES, SUITES, main
from stash_trainer.pairs.feedback import CRITERIA, feedback_evidence

MODEL = "eval-judge"


def _judgment(label: str, source: str, quote: str | None = None, confidence: str = "high") -> str:
    return json.dumps(
        {
            "label": label,
            "confidence": confidence,
            "source": source,
            "evidence_quote": quote,
            "reason": "Because.",
            "alternative": None,
        }
    )


def _target(body: dict[str, Any]) -> str:
    target = re.search(
        r"\nTarget \(step \d+, [^)]*\):\n(.*)\n\nFeedback on the target", body["messages"][-1]["content"], re.S
    )
    return target.group(1)


def agreeing(_path: str, body: dict[str, Any]) -> str:
    """Answers every expected step as the suites expect, citing the first later user message as feedback."""
    expected = {}
    for case in (*FEEDBACK_CASES, *LEARNING_CASES):
        for index, wanted in case.expected.items():
            step = case.trace.steps[index]
            evidence = feedback_evidence(case.trace, step)
            quote = evidence[0].text if wanted.source == "user_feedback" else None
            expected[render_action(step)] = _judgment(wanted.label, wanted.source or "ai_judgment", quote)
    return expected.get(_target(body), _judgment("unclear", "ai_judgment", confidence="low"))


def credulous(_path: str, _body: dict[str, Any]) -> str:
    """Finds every action good on its own judgment: right only where that is the expected answer."""
    return _judgment("positive", "ai_judgment")


@pytest.fixture
def provider(fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> FakeLLM:
    monkeypatch.setenv("STASH_OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("STASH_OPENAI_BASE_URL", fake_llm.url + "/v1")
    monkeypatch.setenv("STASH_FEEDBACK_MODEL", MODEL)
    return fake_llm


def _rows(output: str) -> dict[str, tuple[int, int, str]]:
    """The table's rows: case type → (cases, agreed, rate)."""
    rows = {}
    for line in output.splitlines():
        cells = [cell.strip() for cell in line.split("│")[1:-1]]
        if len(cells) == 4 and cells[1].isdigit():
            rows[cells[0]] = (int(cells[1]), int(cells[2]), cells[3])
    return rows


@pytest.mark.parametrize("suite", list(SUITES))
def test_an_agreeing_provider_agrees_on_every_case(suite: str, provider: FakeLLM, capsys) -> None:
    provider.reply = agreeing
    assert main([suite]) == 0
    rows = _rows(capsys.readouterr().out)
    cases = SUITES[suite]
    assert rows["total"] == (len(cases), len(cases), "100%")
    for kind in {case.kind for case in cases}:
        count = sum(case.kind == kind for case in cases)
        assert rows[kind] == (count, count, "100%")
    # The trainer's classifier with every criterion (rubric_dropout=0), on the configured model.
    bodies = [body for _, body in provider.requests]
    assert {body["model"] for body in bodies} == {MODEL}
    assert all(body["messages"][-1]["content"].endswith(f"Criteria: {', '.join(CRITERIA)}") for body in bodies)


def test_feedback_disagreement_is_counted_per_case_type_and_exits_zero(provider: FakeLLM, capsys) -> None:
    provider.reply = credulous
    assert main(["feedback"]) == 0
    output = capsys.readouterr().out
    assert _rows(output) == {
        "indirect criticism": (1, 0, "0%"),
        "approval": (1, 0, "0%"),  # positive, but not credited to the user's approval
        "sarcasm": (1, 0, "0%"),
        "mixed outcomes": (1, 0, "0%"),
        "abstention": (2, 2, "100%"),
        "prompt injection": (1, 0, "0%"),
        "total": (7, 2, "29%"),
    }
    assert "disagreed: sarcasm [sarcasm]: step 1: positive (ai_judgment), expected negative (user_feedback)" in output


def test_learning_disagreement_is_counted_per_case_type(provider: FakeLLM, capsys) -> None:
    provider.reply = credulous
    assert main(["learning"]) == 0
    assert _rows(capsys.readouterr().out) == {
        "correct answer": (1, 1, "100%"),
        "wrong answer": (1, 0, "0%"),
        "ignored instruction": (1, 0, "0%"),
        "ungrounded claim": (1, 0, "0%"),
        "appropriate uncertainty": (1, 1, "100%"),
        "tool call": (2, 1, "50%"),
        "total": (7, 3, "43%"),
    }


def test_a_malformed_answer_is_a_disagreement(provider: FakeLLM, capsys) -> None:
    provider.reply = lambda _path, _body: _judgment("negative", "user_feedback", "words nobody wrote")
    assert main(["feedback"]) == 0
    output = capsys.readouterr().out
    assert _rows(output)["total"] == (7, 0, "0%")
    assert "malformed answer" in output


def test_a_failing_provider_is_an_error(provider: FakeLLM, capsys) -> None:
    provider.fail_status = 400
    assert main(["learning"]) == 1
    assert "the feedback model failed" in capsys.readouterr().err


def test_without_a_provider_key_the_suite_says_what_to_set(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.delenv("STASH_OPENAI_API_KEY", raising=False)
    assert main(["feedback"]) == 1
    assert "STASH_OPENAI_API_KEY is not set" in capsys.readouterr().err


def test_an_unknown_suite_is_named(capsys) -> None:
    assert main(["vibes"]) == 1
    assert "feedback or learning" in capsys.readouterr().err
