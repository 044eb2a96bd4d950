"""The `rules+ml` process model as the labeler builds it (`make_process_model`), over a real HTTP provider.

The provider is the tests' stand-in OpenAI-compatible server. What matters is the running path: the
classifier is called once per window, over and over, each in its own event loop; its patterns merge
after the rules'; a failing provider leaves the rules alone; a short trajectory makes no call at all.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fakes.llm_server import FakeLLM

from stash_common.settings import load
from stash_common.steps import TraceStep
from stash_labeler.main import make_process_model
from stash_labeler.prm import ProcessModel
from stash_labeler.prm.events import TrajectoryEvent
from stash_labeler.settings import LabelerSettings
from stash_labeler.traces import LabelerTrace

START = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
STUCK = [TrajectoryEvent(START, "agent", "test", ("tests/test_a.py",), False, 10.0)] * 3
DRIFT = {"patterns": [{"name": "expansion_drift", "confidence": 0.9}]}


@pytest.fixture
def provider() -> Iterator[FakeLLM]:
    fake = FakeLLM(keep_alive=True).start()  # a pooled connection outlives each call's event loop
    fake.reply = lambda _path, _body: json.dumps(DRIFT)
    yield fake
    fake.stop()


def _model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, base_url: str, min_events: int = 3) -> ProcessModel:
    monkeypatch.setenv("STASH_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("STASH_OPENAI_API_KEY", "stand-in")
    monkeypatch.setenv("STASH_OPENAI_BASE_URL", base_url)
    monkeypatch.setenv("STASH_PRM_MODEL", "stand-in-prm")
    monkeypatch.setenv("STASH_PRM_CONFIG", json.dumps({"strategy": "rules+ml", "ml_min_events": min_events}))
    return make_process_model(load(LabelerSettings))


def _names(patterns: list) -> list[tuple[str, str]]:
    return [(pattern.name, pattern.source) for pattern in patterns]


def test_the_classifier_merges_after_the_rules_on_every_call(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, provider: FakeLLM
) -> None:
    model = _model(monkeypatch, tmp_path, f"{provider.url}/v1")

    runs = [_names(model.patterns(STUCK)) for _ in range(3)]  # each call runs in a new event loop

    rules = _names(ProcessModel().patterns(STUCK))
    assert ("stuck_on_test", "rules") in rules and "expansion_drift" not in dict(rules)
    assert all([name for name in run if name[1] == "rules"] == rules for run in runs)
    assert all(("expansion_drift", "ml") in run for run in runs), runs
    assert [body["model"] for _, body in provider.requests] == ["stand-in-prm"] * 3


def test_a_stored_trace_gets_the_classifiers_finding_over_its_last_window(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, provider: FakeLLM
) -> None:
    model = _model(monkeypatch, tmp_path, f"{provider.url}/v1")
    steps: list[TraceStep] = [TraceStep("u", 0, "user", "Fix the failing test.")]
    for number in range(3):
        call = f"call_{number}"
        steps.append(TraceStep(f"c{number}", len(steps), "assistant", "", "bash", {"command": "ls"}, call))
        steps.append(TraceStep(f"r{number}", len(steps), "tool", "a.py b.py", "bash", None, call))
    trace = LabelerTrace("t1", "owner", 1, "stash", tuple(steps))

    first, second = model.trace_findings(trace), model.trace_findings(trace)

    assert [finding.pattern.name for finding in first] == [finding.pattern.name for finding in second]
    assert ("expansion_drift", "ml") in [(finding.pattern.name, finding.pattern.source) for finding in second]
    assert len(provider.requests) == 2


def test_a_failing_provider_leaves_the_rules_alone(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, provider: FakeLLM
) -> None:
    def broken(_path: str, _body: dict) -> str:
        raise RuntimeError("the provider is down")

    provider.reply = broken
    model = _model(monkeypatch, tmp_path, f"{provider.url}/v1")

    assert _names(model.patterns(STUCK)) == _names(ProcessModel().patterns(STUCK))
    assert provider.requests  # it was asked, and its failure did not reach the caller


def test_the_cold_start_guard_makes_no_call_for_a_short_trajectory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, provider: FakeLLM
) -> None:
    model = _model(monkeypatch, tmp_path, f"{provider.url}/v1", min_events=4)

    assert _names(model.patterns(STUCK)) == _names(ProcessModel().patterns(STUCK))
    assert provider.requests == []
