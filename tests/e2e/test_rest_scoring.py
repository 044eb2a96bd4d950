"""Learned action credit end to end on the cluster profile: a model trained on the packaged MiniLM publishes
its training scores, and POST /traces/{id}/score runs saved-checkpoint inference from S3 on a new trace."""

import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import orjson
import pytest

from support.ingest import stash_line
from support.models import TrainedModel, finished_model
from support.stack import RunningStack

SCORING_WAIT_S = 240
RUN_KEYS = {"id", "trace_id", "reward_model_id", "status", "error", "created_at", "started_at", "finished_at"}


@pytest.fixture(scope="module")
def stack(cluster_stack: RunningStack) -> RunningStack:
    # The session's cluster stack waits an hour before scoring a change, so that each request below is the one
    # that scores.
    return cluster_stack.for_module("scoring")


def _imported(client: httpx.Client, trace: dict[str, Any]) -> str:
    response = client.post("/traces/import", json={"format": "stash", "data": orjson.dumps(trace).decode()})
    assert response.status_code == 200, response.text
    return str(response.json()["trace_ids"][0])


def _waited(what: str, timeout_s: float, probe: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (found := probe()) is not None:
            return found
        time.sleep(0.5)
    raise TimeoutError(f"{what} within {timeout_s}s")


def _action_ids(detail: dict[str, Any]) -> list[str]:
    """The steps that get an action score: assistant responses with text and tool calls."""
    return [
        step["id"]
        for step in detail["steps"]
        if step["role"] == "assistant" and (step["tool_name"] or step["content"].strip())
    ]


def _model_actions(detail: dict[str, Any], model_id: str) -> list[dict[str, Any]]:
    return [score for score in detail["action_scores"] if score["reward_model_id"] == model_id]


def _model_runs(detail: dict[str, Any], model_id: str) -> list[dict[str, Any]]:
    return [run for run in detail["scoring_runs"] if run["reward_model_id"] == model_id]


@pytest.fixture(scope="module")
def alice(stack: RunningStack, trained_model: TrainedModel) -> Iterator[httpx.Client]:
    """The owner of the session's trained model."""
    with stack.client(trained_model.owner_key) as client:
        yield client


@pytest.fixture(scope="module")
def rated(trained_model: TrainedModel) -> list[str]:
    return trained_model.trace_ids


@pytest.fixture(scope="module")
def model(trained_model: TrainedModel) -> dict[str, Any]:
    trained = trained_model.model
    assert trained["status"] == "succeeded", trained["error"]
    assert trained["metrics"]["action_scoring_version"] == 1 and trained["metrics"]["device"] == "cpu"
    return trained


def _published(client: httpx.Client, trace_id: str, model_id: str) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        detail = client.get(f"/traces/{trace_id}").json()
        return detail if _model_actions(detail, model_id) else None

    return _waited(f"trace {trace_id} got no action scores of model {model_id}", SCORING_WAIT_S, probe)


def test_the_training_job_scores_are_published_for_every_action(
    alice: httpx.Client, rated: list[str], model: dict[str, Any]
) -> None:
    for trace_id in rated:
        detail = _published(alice, trace_id, model["id"])

        actions = _model_actions(detail, model["id"])
        assert [score["step_id"] for score in actions] == _action_ids(detail)
        assert all(-1.0 <= score["credit"] <= 1.0 for score in actions)
        assert {score["reward_model_name"] for score in actions} == {"refund credit"}
        assert set(actions[0]) == {"reward_model_id", "reward_model_name", "step_id", "score", "credit", "created_at"}
        (trace_score,) = [score for score in detail["scores"] if score["reward_model_id"] == model["id"]]
        assert trace_score["reward_model_name"] == "refund credit"


def _longer_trace(external_id: str) -> dict[str, Any]:
    """The support conversation with a follow-up question and a second answer: three actions."""
    trace = orjson.loads(stash_line(external_id))
    trace["steps"] += [
        {"role": "user", "content": "How long will the refund take?"},
        {"role": "assistant", "content": "Refunds reach your card within five business days."},
    ]
    return trace


@pytest.fixture(scope="module")
def scored(alice: httpx.Client, model: dict[str, Any]) -> dict[str, Any]:
    """A trace imported after training, scored on request: its first answer and its finished detail."""
    trace_id = _imported(alice, _longer_trace("scored-on-request"))
    response = alice.post(f"/traces/{trace_id}/score", json={"reward_model_id": model["id"]})
    assert response.status_code == 202, response.text

    def probe() -> dict[str, Any] | None:
        detail = alice.get(f"/traces/{trace_id}").json()
        runs = _model_runs(detail, model["id"])
        return detail if runs and runs[0]["status"] in ("succeeded", "failed") else None

    detail = _waited(f"the scoring run of trace {trace_id} did not finish", SCORING_WAIT_S, probe)
    return {"trace_id": trace_id, "first": response.json(), "detail": detail}


def test_a_new_trace_is_scored_on_request_for_each_response_and_tool_call(
    model: dict[str, Any], scored: dict[str, Any]
) -> None:
    first, detail = scored["first"], scored["detail"]
    assert set(first) == RUN_KEYS
    assert (first["trace_id"], first["reward_model_id"]) == (scored["trace_id"], model["id"])
    assert first["status"] in ("queued", "running")
    (run,) = _model_runs(detail, model["id"])
    assert (run["id"], run["status"], run["error"]) == (first["id"], "succeeded", None)
    assert run["started_at"] is not None and run["finished_at"] is not None

    actions = _model_actions(detail, model["id"])
    roles = {step["id"]: (step["role"], step["tool_name"]) for step in detail["steps"]}
    assert [score["step_id"] for score in actions] == _action_ids(detail)
    assert [roles[score["step_id"]] for score in actions] == [
        ("assistant", "lookup_order"),
        ("assistant", None),
        ("assistant", None),
    ]
    assert all(-1.0 <= score["credit"] <= 1.0 for score in actions)


def test_scoring_again_returns_the_finished_run_without_new_work(
    alice: httpx.Client, model: dict[str, Any], scored: dict[str, Any]
) -> None:
    (run,) = _model_runs(scored["detail"], model["id"])

    again = alice.post(f"/traces/{scored['trace_id']}/score", json={"reward_model_id": model["id"]})

    assert again.status_code == 202, again.text
    assert again.json() == run
    detail = alice.get(f"/traces/{scored['trace_id']}").json()
    assert _model_actions(detail, model["id"]) == _model_actions(scored["detail"], model["id"])


def test_another_owner_gets_404_for_the_trace_and_for_the_model(
    alice: httpx.Client, bob: httpx.Client, model: dict[str, Any], scored: dict[str, Any]
) -> None:
    bobs_trace = _imported(bob, _longer_trace("bobs-own"))

    assert bob.post(f"/traces/{scored['trace_id']}/score", json={"reward_model_id": model["id"]}).status_code == 404
    assert bob.post(f"/traces/{bobs_trace}/score", json={"reward_model_id": model["id"]}).status_code == 404
    assert bob.get(f"/traces/{scored['trace_id']}").status_code == 404


def test_a_trace_without_an_action_is_422(alice: httpx.Client, model: dict[str, Any]) -> None:
    question = {"id": "only-a-question", "steps": [{"role": "user", "content": "Is anyone there?"}]}
    trace_id = _imported(alice, question)

    response = alice.post(f"/traces/{trace_id}/score", json={"reward_model_id": model["id"]})

    assert response.status_code == 422, response.text


def test_a_model_that_did_not_succeed_is_409(alice: httpx.Client, scored: dict[str, Any]) -> None:
    unrated = [_imported(alice, orjson.loads(stash_line(name))) for name in ("unrated", "unrated-too")]
    created = alice.post("/reward-models", json={"name": "too small", "trace_ids": unrated}).json()
    assert finished_model(alice, created["id"])["status"] == "failed"

    response = alice.post(f"/traces/{scored['trace_id']}/score", json={"reward_model_id": created["id"]})

    assert response.status_code == 409, response.text


def test_the_trace_list_shows_each_scored_trace_latest_score(
    alice: httpx.Client, model: dict[str, Any], rated: list[str], scored: dict[str, Any]
) -> None:
    listed = {trace["id"]: trace for trace in alice.get("/traces", params={"limit": 100}).json()["traces"]}

    for trace_id in [*rated, scored["trace_id"]]:
        latest = listed[trace_id]["latest_score"]
        assert (latest["reward_model_id"], latest["reward_model_name"]) == (model["id"], "refund credit")
        assert isinstance(latest["score"], float)
    assert all("latest_score" in trace for trace in listed.values())


def test_a_reimport_never_shows_the_action_scores_of_steps_it_replaced(
    alice: httpx.Client, model: dict[str, Any]
) -> None:
    trace = _longer_trace("reimported")
    trace_id = _imported(alice, trace)
    assert alice.post(f"/traces/{trace_id}/score", json={"reward_model_id": model["id"]}).status_code == 202
    before = _published(alice, trace_id, model["id"])
    trace["steps"][-1]["content"] = "Refunds reach your card within three business days."

    assert _imported(alice, trace) == trace_id
    after = alice.get(f"/traces/{trace_id}").json()

    # This stack's scorer waits an hour before it acts on a change, so it still holds the old steps' scores;
    # the stored trace replaced every step (new ids), and the view shows none of their scores.
    assert {score["step_id"] for score in _model_actions(before, model["id"])} == set(_action_ids(before))
    assert not {step["id"] for step in after["steps"]} & {step["id"] for step in before["steps"]}
    assert _model_actions(after, model["id"]) == []
    assert _model_runs(after, model["id"])  # the run that scored the old revision is still listed
