"""Automatic evaluations through REST in both profiles: import, and the labeled, scored trace appears."""

import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from support.ingest import stash_line
from support.stack import RunningStack, cluster_env, running_stack

EVALUATION_WAIT_S = 20


@pytest.fixture(scope="module", params=["embedded", "cluster"])
def stack(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    module_postgres_url: str,
    module_redis_url: str,
) -> Iterator[RunningStack]:
    cluster = cluster_env(module_postgres_url, module_redis_url)
    with running_stack(tmp_path_factory.mktemp(request.param), **(cluster if request.param == "cluster" else {})) as s:
        yield s


def _accepted_refund() -> str:
    trace = orjson.loads(stash_line("accepted-refund"))
    trace["steps"].append({"role": "user", "content": "Great, thanks a lot!"})
    return orjson.dumps(trace).decode()


def _evaluated(client: httpx.Client, trace_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + EVALUATION_WAIT_S
    while time.monotonic() < deadline:
        detail = client.get(f"/traces/{trace_id}").json()
        if (detail["evaluation"] or {}).get("status") == "succeeded":
            return detail
        time.sleep(0.1)
    raise TimeoutError(f"trace {trace_id} was not evaluated within {EVALUATION_WAIT_S}s")


@pytest.fixture(scope="module")
def trace_id(alice: httpx.Client) -> str:
    response = alice.post("/traces/import", json={"format": "auto", "data": _accepted_refund()})
    assert response.status_code == 200, response.text
    return response.json()["trace_ids"][0]


def test_an_imported_trace_comes_back_labeled_and_scored(alice: httpx.Client, trace_id: str) -> None:
    detail = _evaluated(alice, trace_id)

    assert detail["evaluation"]["labeler"] == "rules"
    assert detail["evaluation"]["outcome"] == "success"
    assert detail["evaluation"]["score"] == pytest.approx(1.0 - 0.03)
    steps = detail["steps"]
    assert steps[0]["metadata"] == {}  # the system prompt is context, never labeled
    assert steps[1]["metadata"]["label"]["intent"] == "request"
    call = steps[2]["metadata"]
    assert call["label"]["type"] == "lookup" and call["label_source"] == "rules"
    assert call["reward"]["points"] == pytest.approx(-0.03)
    assert call["reward"]["passed_back"] == pytest.approx(0.3)
    assert call["reward"]["score"] == pytest.approx(0.27)
    assert call["reward"]["credit"] == 1  # legacy ordinal band of 0.27
    assert call["reward"]["expected_credit"] == pytest.approx(0.27)
    assert steps[4]["metadata"]["reward"]["terms"] == [{"reason": "answer accepted (confident)", "points": 1.0}]
    reaction = steps[5]["metadata"]["label"]
    assert (reaction["verdict"], reaction["verdict_target"]) == ("accepted", steps[4]["metadata"]["label"]["chunk_id"])
    assert detail["step_scores_source"] == "automatic" and call["reward_source"] == "automatic"
    assert (
        detail["rule_step_scores"]
        == detail["step_scores"]
        == [
            {
                "task_id": "t0",
                "first_step_id": steps[1]["id"],
                "last_step_id": steps[5]["id"],
                "answer_points": 1.0,
                "work_cost": -0.03,
                "score": pytest.approx(0.97),
                "capped": False,
            }
        ]
    )


IMPORTED_REWARD = {"points": 0.5, "score": 0.5, "terms": [{"reason": "grader: correct", "points": 0.5}]}
IMPORTED_TASKS = [{"task_id": "refund", "score": 0.75, "answer_points": 0.8, "work_cost": -0.05, "capped": False}]


def test_imported_step_rewards_and_task_scores_are_kept_with_the_rule_scores_beside_them(
    alice: httpx.Client,
) -> None:
    trace = orjson.loads(_accepted_refund())
    trace["id"] = "imported-supervision"
    trace["metadata"] = {"step_scores": IMPORTED_TASKS, "rubric_summary": "graded by an external rubric"}
    trace["steps"][4]["metadata"] = {"reward": IMPORTED_REWARD}
    imported = alice.post("/traces/import", json={"format": "stash", "data": orjson.dumps(trace).decode()})
    assert imported.status_code == 200, imported.text

    detail = _evaluated(alice, imported.json()["trace_ids"][0])

    answer, call = detail["steps"][4]["metadata"], detail["steps"][2]["metadata"]
    assert (answer["reward"], answer["reward_source"]) == (IMPORTED_REWARD, "imported")
    assert answer["rule_reward"]["terms"] == [{"reason": "answer accepted (confident)", "points": 1.0}]
    assert call["reward_source"] == "automatic" and "rule_reward" not in call
    assert call["reward"]["score"] == pytest.approx(0.27)
    assert (detail["step_scores"], detail["step_scores_source"]) == (IMPORTED_TASKS, "imported")
    assert [task["score"] for task in detail["rule_step_scores"]] == [pytest.approx(0.97)]
    assert detail["metadata"]["rubric_summary"] == "graded by an external rubric"


def test_the_trace_list_shows_the_latest_score(alice: httpx.Client, trace_id: str) -> None:
    _evaluated(alice, trace_id)

    listed = {item["id"]: item for item in alice.get("/traces").json()["traces"]}

    assert listed[trace_id]["evaluation"] == {"revision": 1, "score": pytest.approx(0.97), "outcome": "success"}


def test_relabel_queues_the_current_revision_again(alice: httpx.Client, bob: httpx.Client, trace_id: str) -> None:
    _evaluated(alice, trace_id)

    response = alice.post(f"/traces/{trace_id}/relabel")

    assert response.status_code == 202
    assert response.json() == {"revision": 1, "status": "queued"}
    assert _evaluated(alice, trace_id)["evaluation"]["score"] == pytest.approx(0.97)
    assert bob.post(f"/traces/{trace_id}/relabel").status_code == 404


def test_reads_survive_a_dead_labeler(stack: RunningStack, alice: httpx.Client, trace_id: str) -> None:
    os.kill(stack.pid("labeler"), signal.SIGKILL)

    detail = alice.get(f"/traces/{trace_id}")
    listing = alice.get("/traces")

    assert detail.status_code == 200 and detail.json()["evaluation"] is None
    assert listing.status_code == 200 and listing.json()["traces"][0]["evaluation"] is None
