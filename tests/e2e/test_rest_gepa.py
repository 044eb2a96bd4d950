"""GEPA end to end on the cluster profile: a real gepa optimisation loop writes a SKILL.md against a reward
model trained on the packaged MiniLM, with LiteLLM talking to a local server that speaks the OpenAI protocol.

The stand-in task model answers a refund request well (with the refund's reference number) only when the
skill in its system message tells it to; the stand-in reflection model names the skill and proposes a body
that does. The reward model learned from rated replies that the reference number is what makes a reply good,
so a better skill gets a better reply, and GEPA must find it.
"""

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from fakes.llm_server import FakeLLM

from support.processes import free_port, stash_rm
from support.stack import RunningStack

TRAINING_WAIT_S = 240
GEPA_WAIT_S = 300
TASK, REFLECTION = "openai/stand-in-task", "openai/stand-in-reflection"
WINNING_RULE = "Always give the customer the refund reference number."
FAILING_ORDER = "1105"  # the task model refuses this example's request: that example's failure, not the run's
RUN_KEYS = {
    "id",
    "reward_model_id",
    "task_model",
    "task_api_base",
    "reflection_model",
    "max_metric_calls",
    "status",
    "error",
    "retryable",
    "progress",
    "budget_warning",
    "train_examples",
    "validation_examples",
    "skill_name",
    "skill_description",
    "best_skill",
    "best_score",
    "seed_skill",
    "seed_score",
    "candidates",
    "example_failures",
    "created_at",
    "started_at",
    "finished_at",
}


def good_reply(order: str) -> str:
    return f"Your refund for order {order} is approved. Your refund reference number is R-{order}-77."


def bad_reply(order: str) -> str:
    return f"Sorry, I cannot help with order {order}. Please contact someone else."


def _order(text: str) -> str:
    found = re.search(r"order (\d+)", text)
    return found.group(1) if found else "0"


def _stand_in(path: str, body: dict[str, Any]) -> str:
    """The task model follows the skill; the reflection model names the skill and proposes the winning rule."""
    messages = body["messages"]
    if body["model"] == "stand-in-reflection":
        prompt = messages[-1]["content"]
        if prompt.startswith("You name a skill"):
            return 'Sure: {"name": "Refund Desk!", "description": "Use when a customer asks for a refund of an order."}'
        return f"```markdown\n# Refunds\n\n1. Approve the refund the customer asked for.\n2. {WINNING_RULE}\n```"
    skill = messages[0]["content"]
    order = _order(messages[-1]["content"])
    return good_reply(order) if "reference number" in skill else bad_reply(order)


def _refused(path: str, body: dict[str, Any]) -> int | None:
    is_task = body["model"] == "stand-in-task"
    return 400 if is_task and f"order {FAILING_ORDER}" in body["messages"][-1]["content"] else None


@pytest.fixture(scope="module")
def llm(cluster_llm: FakeLLM) -> Iterator[FakeLLM]:
    """The session stack's fake LLM, answering as this module's stand-in models, with only this module's requests."""
    answering = cluster_llm.reply, cluster_llm.status_of
    cluster_llm.reply, cluster_llm.status_of = _stand_in, _refused
    cluster_llm.requests.clear()
    yield cluster_llm
    cluster_llm.reply, cluster_llm.status_of = answering


@pytest.fixture(scope="module")
def stack(cluster_stack: RunningStack, llm: FakeLLM) -> RunningStack:
    return cluster_stack.for_module("gepa")


def _waited(what: str, timeout_s: float, probe: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (found := probe()) is not None:
            return found
        time.sleep(0.5)
    raise TimeoutError(f"{what} within {timeout_s}s")


def _imported(client: httpx.Client, steps: list[dict[str, Any]], external_id: str) -> str:
    trace = {"id": external_id, "steps": steps}
    response = client.post("/traces/import", json={"format": "stash", "data": orjson.dumps(trace).decode()})
    assert response.status_code == 200, response.text
    return str(response.json()["trace_ids"][0])


def _annotate(client: httpx.Client, trace_id: str, body: dict[str, Any]) -> None:
    response = client.post(f"/traces/{trace_id}/annotations", json=body)
    assert response.status_code == 201, response.text


def _rated_refunds(client: httpx.Client) -> list[str]:
    """Six refund requests: the replies with a reference number rated +, the refusals rated − with a comment."""
    trace_ids = []
    for number in range(6):
        order = str(1100 + number)
        good = number % 2 == 0
        steps = [
            {"role": "system", "content": "You are the support agent of an online shop."},
            {"role": "user", "content": f"I want a refund for order {order}"},
            {"role": "assistant", "content": good_reply(order) if good else bad_reply(order)},
        ]
        trace_id = _imported(client, steps, f"gepa-refund-{order}")
        reply = client.get(f"/traces/{trace_id}").json()["steps"][2]
        _annotate(client, trace_id, {"step_id": reply["id"], "rating": 1 if good else -1})
        if not good:
            _annotate(client, trace_id, {"step_id": reply["id"], "comment": "Never refuse; give the reference number"})
        trace_ids.append(trace_id)
    return trace_ids


def _finished(client: httpx.Client, path: str) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        found = client.get(path).json()
        return found if found["status"] in ("succeeded", "failed") else None

    return _waited(f"{path} did not finish", GEPA_WAIT_S, probe)


@pytest.fixture(scope="module")
def model(alice: httpx.Client) -> dict[str, Any]:
    trace_ids = _rated_refunds(alice)
    created = alice.post("/reward-models", json={"name": "refunds", "trace_ids": trace_ids, "epochs": 3})
    assert created.status_code == 200, created.text
    trained = _finished(alice, f"/reward-models/{created.json()['id']}")
    assert trained["status"] == "succeeded", trained["error"]
    return trained


def _gepa_run(client: httpx.Client, model_id: str, **settings: Any) -> dict[str, Any]:
    body = {"reward_model_id": model_id, "task_model": TASK, "reflection_model": REFLECTION, **settings}
    created = client.post("/gepa-runs", json=body)
    assert created.status_code == 200, created.text
    return dict(created.json())


@pytest.fixture(scope="module")
def optimised(alice: httpx.Client, llm: FakeLLM, model: dict[str, Any]) -> dict[str, Any]:
    """A run of 40 metric calls: what the API said at once, before the end, and once it finished."""
    first = _gepa_run(alice, model["id"], task_api_base=f"{llm.url}/v1", max_metric_calls=40)
    skill_before = alice.get(f"/gepa-runs/{first['id']}/skill")
    finished = _finished(alice, f"/gepa-runs/{first['id']}")
    return {"first": first, "skill_before": skill_before, "finished": finished}


def test_a_run_is_queued_with_the_request_and_has_no_skill_until_it_succeeds(
    model: dict[str, Any], optimised: dict[str, Any], llm: FakeLLM
) -> None:
    first = optimised["first"]

    assert set(first) == RUN_KEYS
    assert (first["status"], first["reward_model_id"], first["task_model"]) == ("queued", model["id"], TASK)
    assert (first["task_api_base"], first["reflection_model"], first["max_metric_calls"]) == (
        f"{llm.url}/v1",
        REFLECTION,
        40,
    )
    assert (first["skill_name"], first["skill_description"], first["best_skill"]) == (None, None, None)
    assert optimised["skill_before"].status_code == 404
    assert "has no skill yet" in optimised["skill_before"].json()["detail"]


def test_gepa_finds_a_skill_that_beats_the_seed_against_the_reward_model(optimised: dict[str, Any]) -> None:
    run = optimised["finished"]

    assert run["status"] == "succeeded", run["error"]
    assert (run["skill_name"], run["skill_description"]) == (
        "refund-desk",
        "Use when a customer asks for a refund of an order.",
    )
    assert run["best_score"] > run["seed_score"]
    assert WINNING_RULE in run["best_skill"] and WINNING_RULE not in run["seed_skill"]
    assert run["best_skill"].startswith(
        "---\nname: refund-desk\ndescription: Use when a customer asks for a refund of an order.\n---\n\n# Refunds"
    )
    candidates = {candidate["skill"]: candidate["score"] for candidate in run["candidates"]}
    assert candidates[run["best_skill"]] == run["best_score"] and candidates[run["seed_skill"]] == run["seed_score"]
    assert max(candidates.values()) == run["best_score"]
    assert (run["train_examples"], run["validation_examples"], run["budget_warning"]) == (4, 2, None)
    assert 0 < run["progress"] <= 40


def test_a_provider_error_on_one_example_is_recorded_as_that_examples_failure(optimised: dict[str, Any]) -> None:
    failures = optimised["finished"]["example_failures"]

    assert len(failures) == 1
    assert "stand-in-task failed: BadRequestError" in failures[0]["error"]


def test_the_task_model_gets_the_system_prompt_a_blank_line_then_the_skill_and_the_input(
    llm: FakeLLM, optimised: dict[str, Any]
) -> None:
    task_calls = [body for _, body in llm.requests if body["model"] == "stand-in-task"]
    seed = optimised["finished"]["seed_skill"]
    seeded = next(body for body in task_calls if seed in body["messages"][0]["content"])

    system, request = seeded["messages"]
    assert system == {
        "role": "system",
        "content": f'You are the support agent of an online shop.\n\n<skill name="refund-desk">\n{seed}\n</skill>',
    }
    assert request["role"] == "user" and request["content"].startswith("I want a refund for order")


def test_reflection_reads_the_score_the_reviewers_comments_and_the_training_evidence(
    llm: FakeLLM, optimised: dict[str, Any]
) -> None:
    prompts = [
        body["messages"][-1]["content"]
        for _, body in llm.requests
        if body["model"] == "stand-in-reflection" and body["messages"][-1]["content"].startswith("You improve")
    ]
    # Every training example is in some minibatch, and at least one of the three refusals trains.
    everything = "\n".join(prompts)

    assert prompts, "the reflection model was never asked for a new body"
    assert all("Return only the body" in prompt and "Reward model score: " in prompt for prompt in prompts)
    assert "A reviewer commented on step 2 (Assistant: Sorry, I cannot help with order" in everything
    assert "): Never refuse; give the reference number" in everything
    assert "Training preferred step 2 (Assistant: Your refund for order" in everything


def test_the_skill_downloads_as_a_markdown_attachment(alice: httpx.Client, optimised: dict[str, Any]) -> None:
    run = optimised["finished"]

    response = alice.get(f"/gepa-runs/{run['id']}/skill")

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/markdown")
    assert response.headers["content-disposition"] == 'attachment; filename="SKILL.md"'
    assert response.text == run["best_skill"]


def test_runs_are_listed_newest_first_and_only_to_their_owner(
    alice: httpx.Client, bob: httpx.Client, model: dict[str, Any], optimised: dict[str, Any]
) -> None:
    run_id = optimised["finished"]["id"]

    assert run_id in [run["id"] for run in alice.get("/gepa-runs").json()]
    assert bob.get("/gepa-runs").json() == []
    assert bob.get(f"/gepa-runs/{run_id}").status_code == 404
    assert bob.get(f"/gepa-runs/{run_id}/skill").status_code == 404
    refused = bob.post("/gepa-runs", json={"reward_model_id": model["id"]})
    assert refused.status_code == 404 and model["id"] in refused.json()["detail"]


def test_a_model_that_did_not_succeed_is_refused_with_409(alice: httpx.Client) -> None:
    steps = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]
    lone = [_imported(alice, steps, name) for name in ("lone", "lone-too")]
    created = alice.post("/reward-models", json={"name": "too small", "trace_ids": lone})
    failed = _finished(alice, f"/reward-models/{created.json()['id']}")
    assert failed["status"] == "failed"

    refused = alice.post("/gepa-runs", json={"reward_model_id": failed["id"]})

    assert refused.status_code == 409
    assert "is failed: GEPA needs a succeeded model" in refused.json()["detail"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"max_metric_calls": 0}, "max_metric_calls"),
        ({"task_api_base": "ftp://vllm:8000"}, "task_api_base"),
        ({"task_model": ""}, "task_model"),
    ],
)
def test_bad_settings_are_422_naming_the_field(
    alice: httpx.Client, model: dict[str, Any], body: dict[str, Any], field: str
) -> None:
    response = alice.post("/gepa-runs", json={"reward_model_id": model["id"], **body})

    assert response.status_code == 422
    assert field in response.text


def test_the_defaults_need_an_anthropic_key_and_the_failed_run_says_so_and_can_be_retried(
    alice: httpx.Client, model: dict[str, Any]
) -> None:
    # What the web UI's start form asks before a run without models: the key, where the reflection API base
    # (this stack's stand-in) does not serve reflection.
    assert alice.get("/gepa-defaults").json() == {
        "task_model": "anthropic/claude-haiku-4-5",
        "reflection_model": "anthropic/claude-sonnet-5",
        "task_model_missing": "ANTHROPIC_API_KEY",
        "reflection_model_missing": None,
    }
    created = alice.post("/gepa-runs", json={"reward_model_id": model["id"]})
    assert created.status_code == 200, created.text
    assert (created.json()["task_model"], created.json()["reflection_model"], created.json()["max_metric_calls"]) == (
        "anthropic/claude-haiku-4-5",
        "anthropic/claude-sonnet-5",
        40,
    )

    failed = _finished(alice, f"/gepa-runs/{created.json()['id']}")

    assert failed["status"] == "failed"
    assert "needs ANTHROPIC_API_KEY in the gepa service's environment" in failed["error"]
    assert failed["retryable"]  # once the key is set, the same run succeeds
    retried = alice.post(f"/gepa-runs/{failed['id']}/retry")
    assert retried.status_code == 202 and retried.json()["status"] == "queued"
    assert retried.json()["id"] == failed["id"] and retried.json()["error"] is None


def test_a_run_is_deleted_once_settled_never_while_queued_or_running_and_the_cli_deletes_too(
    stack: RunningStack, alice: httpx.Client, bob: httpx.Client, model: dict[str, Any]
) -> None:
    created = alice.post("/gepa-runs", json={"reward_model_id": model["id"]}).json()
    env = {**stack.env, "STASH_API_KEY": alice.headers["authorization"].removeprefix("Bearer ")}

    early = alice.delete(f"/gepa-runs/{created['id']}")
    failed = _finished(alice, f"/gepa-runs/{created['id']}")
    foreign = bob.delete(f"/gepa-runs/{created['id']}")
    deleted = stash_rm("skills", "delete", created["id"], env=env)

    assert early.status_code == 409 and "it can be deleted once it succeeded or failed" in early.json()["detail"]
    assert failed["status"] == "failed" and foreign.status_code == 404
    assert deleted.returncode == 0 and f"Deleted GEPA run {created['id']}" in deleted.stdout, deleted.stderr
    assert alice.get(f"/gepa-runs/{created['id']}").status_code == 404
    assert created["id"] not in [run["id"] for run in alice.get("/gepa-runs").json()]
    assert alice.delete(f"/gepa-runs/{created['id']}").status_code == 404


def test_a_succeeded_run_cannot_be_retried(alice: httpx.Client, optimised: dict[str, Any]) -> None:
    response = alice.post(f"/gepa-runs/{optimised['finished']['id']}/retry")

    assert response.status_code == 409
    assert "only a failed GEPA run can be retried" in response.json()["detail"]


def test_a_budget_too_small_for_a_second_candidate_is_warned_on_the_run(
    alice: httpx.Client, llm: FakeLLM, model: dict[str, Any]
) -> None:
    run = _gepa_run(alice, model["id"], task_api_base=f"{llm.url}/v1", max_metric_calls=5)

    finished = _finished(alice, f"/gepa-runs/{run['id']}")

    assert finished["status"] == "succeeded", finished["error"]
    assert finished["budget_warning"].startswith("max_metric_calls 5 is below 17 (V + 3(R + V) with V = 2")


def test_the_cli_lists_the_runs_and_saves_a_runs_skill(
    stack: RunningStack, alice: httpx.Client, optimised: dict[str, Any], tmp_path: Path
) -> None:
    run = optimised["finished"]
    env = {**stack.env, "STASH_API_KEY": alice.headers["authorization"].removeprefix("Bearer ")}
    output = tmp_path / "SKILL.md"

    listed = stash_rm("skills", "list", env=env)
    saved = stash_rm("skills", "download", run["id"], "--output", str(output), env=env)
    missing = stash_rm("skills", "download", "no-such-run", env=env)

    assert listed.returncode == 0 and run["id"] in listed.stdout and "refund-desk" in listed.stdout
    assert saved.returncode == 0, saved.stderr
    assert output.read_text() == run["best_skill"]
    assert f"{run['seed_score']:.3f}" in saved.stdout and f"{run['best_score']:.3f}" in saved.stdout
    assert missing.returncode == 1 and "HTTP 404: GEPA run no-such-run not found" in missing.stderr


def test_an_unreachable_task_server_fails_the_run_naming_it(alice: httpx.Client, model: dict[str, Any]) -> None:
    address = f"http://127.0.0.1:{free_port()}/v1"
    run = _gepa_run(alice, model["id"], task_api_base=address)

    failed = _finished(alice, f"/gepa-runs/{run['id']}")

    assert failed["status"] == "failed"
    assert f"the task model {TASK} at {address} cannot be used" in failed["error"]
    assert "check that the server is running and reachable from the worker" in failed["error"]
