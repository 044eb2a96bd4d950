"""The learning report over REST with a feedback provider configured (the tests' stand-in OpenAI server).

`feedback` is null before extraction was recorded (no provider: test_rest_reward_models.py), `[]` when it
found nothing to learn from, and otherwise one item per assessed action, each not trained on saying why
(`pair_exclusion`). A retry shows the last report, marked `feedback_from_earlier_attempt`, until its own
extraction records a new one.
"""

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from fakes.llm_server import FakeLLM

from support.ingest import stash_line
from support.stack import RunningStack, running_stack

WAIT_S = 240
UNCLEAR = {"label": "unclear", "confidence": "low", "source": "ai_judgment", "evidence_quote": None}


REVISED = "Here is the answer, checked against the order."


class GatedJudge:
    """Answers every feedback judgment `unclear`, each only once `gate` is open; other requests get "ok".

    With `revise` set, judgments are instead a confident `negative` with the alternative REVISED, and the
    independent review prefers whichever candidate is REVISED.
    """

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.gate.set()
        self.revise = False

    def __call__(self, _path: str, body: dict[str, Any]) -> str:
        answer = (body.get("response_format") or {}).get("json_schema", {}).get("name")
        if answer == "comparison_review":
            prompt = body["messages"][-1]["content"]
            preferred = "A" if prompt.index(REVISED) < prompt.index("Candidate B:") else "B"
            return json.dumps({"preferred": preferred, "supported": True, "reason": "It checks the order."})
        if answer != "feedback_judgment":
            return "ok"  # the labeler's requests: not what this module tests
        self.gate.wait(WAIT_S)
        if self.revise:
            judgment = {**UNCLEAR, "label": "negative", "confidence": "high", "alternative": REVISED}
            return json.dumps({**judgment, "reason": "It did not check the order."})
        return json.dumps({**UNCLEAR, "reason": "Nothing shows whether this helped.", "alternative": None})


@pytest.fixture(scope="module")
def judge() -> Iterator[tuple[FakeLLM, GatedJudge]]:
    fake, gated = FakeLLM().start(), GatedJudge()
    fake.reply = gated
    yield fake, gated
    gated.gate.set()
    fake.stop()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, judge: tuple[FakeLLM, GatedJudge]) -> Iterator[RunningStack]:
    fake, _ = judge
    with running_stack(
        tmp_path_factory.mktemp("learning"),
        STASH_OPENAI_API_KEY="stand-in",
        STASH_OPENAI_BASE_URL=f"{fake.url}/v1",
        STASH_TRAINER_DEVICE="cpu",
        STASH_TRAINER_MAX_LENGTH="128",
    ) as running:
        yield running


def _imported(client: httpx.Client, name: str, request: str | None = None) -> tuple[str, list[dict[str, Any]]]:
    """Import a trace whose first user request (its task group) is `request`, by default one of its own.

    A shared `request` still leaves the trace's own answer (named after it), so its pairs are its own.
    """
    trace = orjson.loads(stash_line(name))
    trace["steps"][1]["content"] = request or f"I want a refund for order {name}"
    if request:
        trace["steps"][4]["content"] += f" Reference {name}."
    imported = client.post("/traces/import", json={"format": "stash", "data": orjson.dumps(trace).decode()})
    trace_id = imported.json()["trace_ids"][0]
    return trace_id, client.get(f"/traces/{trace_id}").json()["steps"]


def _settled(client: httpx.Client, model_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        model = client.get(f"/reward-models/{model_id}").json()
        if model["status"] in ("succeeded", "failed"):
            return model
        time.sleep(0.5)
    raise TimeoutError(f"reward model {model_id} did not settle within {WAIT_S}s")


def test_every_action_rated_leaves_nothing_to_learn_an_empty_report(alice: httpx.Client) -> None:
    trace_ids = []
    for name in ("rated-1", "rated-2"):
        trace_id, steps = _imported(alice, name)
        for step, rating in ((steps[2], 1), (steps[4], -1)):
            alice.post(f"/traces/{trace_id}/annotations", json={"step_id": step["id"], "rating": rating})
        trace_ids.append(trace_id)

    created = alice.post("/reward-models", json={"name": "rated", "trace_ids": trace_ids}).json()
    model = _settled(alice, created["id"])

    assert model["status"] == "succeeded", model["error"]
    assert model["feedback"] == [] and model["feedback_from_earlier_attempt"] is False


def test_findings_say_why_they_made_no_pair_and_a_retry_keeps_the_report_until_it_records_its_own(
    alice: httpx.Client, judge: tuple[FakeLLM, GatedJudge]
) -> None:
    _, gated = judge
    trace_ids = [_imported(alice, name)[0] for name in ("unrated-1", "unrated-2")]
    created = alice.post("/reward-models", json={"name": "unrated", "trace_ids": trace_ids}).json()

    failed = _settled(alice, created["id"])

    assert failed["status"] == "failed" and "found no preference pairs" in failed["error"]
    report = failed["feedback"]
    assert [(item["step_index"], item["label"]) for item in report] == [(2, "unclear"), (4, "unclear")] * 2
    assert {(item["included_in_training"], item["pair_exclusion"]) for item in report} == {
        (False, "the label is unclear")
    }
    assert failed["feedback_from_earlier_attempt"] is False

    gated.gate.clear()  # the retry's extraction waits for the judge: the earlier report must show meanwhile
    try:
        assert alice.post(f"/reward-models/{created['id']}/retry").status_code == 202
        retrying = alice.get(f"/reward-models/{created['id']}").json()
        assert retrying["status"] in ("queued", "running")
        assert (retrying["feedback"], retrying["feedback_from_earlier_attempt"]) == (report, True)
    finally:
        gated.gate.set()

    again = _settled(alice, created["id"])
    assert again["status"] == "failed" and again["feedback_from_earlier_attempt"] is False
    assert len(again["feedback"]) == len(report)


def test_api_supplied_criteria_and_a_sampled_action_limit_are_recorded_and_used(
    alice: httpx.Client, judge: tuple[FakeLLM, GatedJudge]
) -> None:
    fake, _ = judge
    trace_ids = [_imported(alice, name)[0] for name in ("criteria-1", "criteria-2")]
    config = {
        "input_version": 3,
        "annotation_source": "automatic",
        "criteria": ["names the order number"],
        "max_actions_per_trace": 1,
    }
    asked_before = len(fake.requests)

    created = alice.post("/reward-models", json={"name": "criteria", "trace_ids": trace_ids, "training_config": config})

    assert created.status_code == 200, created.text
    recorded = created.json()["training_config"]
    assert recorded == {**config, "action_sample_seed": recorded["action_sample_seed"]}
    assert isinstance(recorded["action_sample_seed"], int)
    settled = _settled(alice, created.json()["id"])
    assert len(settled["feedback"]) == 2  # one sampled action per trace, its criteria recorded in the reason
    assert all(item["reason"].startswith("Criteria: names the order number.") for item in settled["feedback"])
    judged = [
        body["messages"][-1]["content"]
        for _, body in fake.requests[asked_before:]
        if (body.get("response_format") or {}).get("json_schema", {}).get("name") == "feedback_judgment"
    ]
    assert len(judged) == 2 and all(prompt.endswith("Criteria: names the order number") for prompt in judged)


def test_a_bad_training_config_is_422_naming_the_field(alice: httpx.Client) -> None:
    trace_ids = [_imported(alice, name)[0] for name in ("bad-config-1", "bad-config-2")]
    config = {"input_version": 3, "annotation_source": "automatic", "max_actions_per_trace": 0}

    response = alice.post("/reward-models", json={"name": "bad", "trace_ids": trace_ids, "training_config": config})

    assert response.status_code == 422
    assert "max_actions_per_trace" in response.text


def test_version_3_holds_out_whole_task_groups_and_a_retry_evaluates_on_the_same_ones(
    alice: httpx.Client, judge: tuple[FakeLLM, GatedJudge]
) -> None:
    _, gated = judge
    groups = {group: [_imported(alice, f"{group}-{n}", f"Refund order {group}")[0] for n in range(2)] for group in "xy"}
    config = {"input_version": 3, "annotation_source": "automatic"}
    body = {"name": "task groups", "trace_ids": [*groups["x"], *groups["y"]], "training_config": config}
    created = alice.post("/reward-models", json=body).json()

    failed = _settled(alice, created["id"])  # every judgment unclear: nothing evaluated, and no pairs

    assert failed["status"] == "failed", failed
    assert {item["included_in_evaluation"] for item in failed["feedback"]} == {False}

    gated.revise = True
    try:
        assert alice.post(f"/reward-models/{created['id']}/retry").status_code == 202
        retried = _settled(alice, created["id"])
    finally:
        gated.revise = False

    assert retried["status"] == "succeeded", retried["error"]
    report = retried["feedback"]
    evaluated = {item["trace_id"] for item in report if item["included_in_evaluation"]}
    trained = {item["trace_id"] for item in report if item["included_in_training"]}
    assert evaluated in (set(groups["x"]), set(groups["y"]))  # one whole task group, both of its traces
    assert trained == set(groups["x"] + groups["y"]) - evaluated
    assert not any(item["included_in_training"] and item["included_in_evaluation"] for item in report)
    assert retried["metrics"]["eval_pairs"] >= len(evaluated)
