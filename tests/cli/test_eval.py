"""`stash-rm eval feedback|learning` through the console script, the trainer's suite, a stand-in provider."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from fakes.llm_server import FakeLLM

STASH_RM = Path(sys.executable).with_name("stash-rm")  # this checkout's console script


def _run(fake_llm: FakeLLM, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "STASH_OPENAI_API_KEY": "test-key",
        "STASH_OPENAI_BASE_URL": fake_llm.url + "/v1",
        "STASH_FEEDBACK_MODEL": "eval-judge",
        "COLUMNS": "120",
    }
    return subprocess.run([str(STASH_RM), *args], env=env, capture_output=True, text=True, timeout=120, check=False)


def test_eval_learning_prints_the_agreement_table_and_exits_zero_on_disagreement(fake_llm: FakeLLM) -> None:
    judgment = {"label": "positive", "confidence": "high", "source": "ai_judgment"}
    fake_llm.reply = lambda _path, _body: json.dumps(
        {**judgment, "evidence_quote": None, "reason": "r", "alternative": None}
    )
    result = _run(fake_llm, "eval", "learning")
    assert result.returncode == 0, result.stderr
    total = next(line for line in result.stdout.splitlines() if "total" in line)
    assert [cell.strip() for cell in total.split("│")[1:-1]] == ["total", "7", "3", "43%"]
    assert "learning suite, rubric_dropout=0" in result.stdout


def test_eval_feedback_fails_when_the_provider_fails(fake_llm: FakeLLM) -> None:
    fake_llm.fail_status = 400
    result = _run(fake_llm, "eval", "feedback")
    assert result.returncode == 1
    assert "the feedback model failed" in result.stderr
