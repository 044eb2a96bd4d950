"""The shared evaluator's data end to end on both profiles: consent isolation, independent review, benchmarks
held out of snapshots, revocation, the operator's CLI and its audit trail; six real processes each time."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from support.ingest import stash_line
from support.models import S3_ENV, new_bucket, s3_client
from support.processes import stash_rm
from support.stack import RunningStack, cluster_env, running_stack

SECRET = "BOB-PRIVATE-REQUEST"


@pytest.fixture(scope="module", params=["embedded", "cluster"])
def profile(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, profile: str, request: pytest.FixtureRequest
) -> Iterator[RunningStack]:
    env: dict[str, str] = {}
    if profile == "cluster":
        endpoint = request.getfixturevalue("s3_endpoint_url")
        env = {
            **cluster_env(request.getfixturevalue("module_postgres_url"), request.getfixturevalue("module_redis_url")),
            "STASH_S3_BUCKET": new_bucket(endpoint, "stash-evaluator"),
            "STASH_S3_ENDPOINT_URL": endpoint,
            "STASH_S3_REGION": S3_ENV["AWS_DEFAULT_REGION"],
            **S3_ENV,
        }
    with running_stack(tmp_path_factory.mktemp(f"evaluator-{profile}"), **env) as running:
        yield running


def account(stack: RunningStack, name: str) -> httpx.Client:
    return stack.client(stack.create_user(name))


def rated_trace(client: httpx.Client, request_text: str, source_id: str) -> str:
    """A trace whose lookup call is rated + and whose answer is rated −."""
    trace = orjson.loads(stash_line())
    trace["steps"][1]["content"] = request_text
    body = {"format": "stash", "data": orjson.dumps(trace).decode(), "source_id": source_id}
    trace_id = client.post("/traces/import", json=body).json()["trace_ids"][0]
    steps = client.get(f"/traces/{trace_id}").json()["steps"]
    for step, rating in ((steps[2], 1), (steps[4], -1)):
        response = client.post(f"/traces/{trace_id}/annotations", json={"step_id": step["id"], "rating": rating})
        assert response.status_code == 201, response.text
    return trace_id


def operator(stack: RunningStack, *args: str) -> Any:
    """`stash-rm evaluator ...` as operator ann; its JSON answer."""
    result = stash_rm("evaluator", *args, *(["--operator", "ann"] if _records(args) else []), env=stack.env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout) if result.stdout.strip().startswith(("{", "[")) else result.stdout


def _records(args: tuple[str, ...]) -> bool:
    return args[0] in ("reviewers", "policy", "collect", "freeze", "snapshot")


def review_all(client: httpx.Client) -> list[str]:
    """Review every queued comparison, preferring the lookup call; the reviewed ids."""
    reviewed = []
    for item in client.get("/evaluator/review-queue", params={"limit": 50}).json():
        verdict = "better" if "called lookup_order" in item["action_a"] else "worse"
        body = {"comparison_id": item["comparison_id"], "verdict": verdict}
        assert client.post("/evaluator/reviews", json=body).status_code == 201
        reviewed.append(item["comparison_id"])
    return reviewed


def snapshot_lines(stack: RunningStack, profile: str, key: str) -> list[dict[str, Any]]:
    if profile == "cluster":
        body = s3_client(stack.env["STASH_S3_ENDPOINT_URL"]).get_object(Bucket=stack.env["STASH_S3_BUCKET"], Key=key)
        text = body["Body"].read().decode()
    else:
        text = (stack.data_dir / "artifacts" / key).read_text()
    return [json.loads(line) for line in text.splitlines()]


def test_consent_review_benchmark_snapshot_and_revocation(stack: RunningStack, profile: str) -> None:
    alice, bob = account(stack, "alice"), account(stack, "bob")
    carol, dave = account(stack, "carol"), account(stack, "dave")
    first = rated_trace(alice, "I want a refund for order 1182", "support")
    second = rated_trace(alice, "Where is my parcel 77?", "support")
    rated_trace(bob, f"{SECRET}: refund order 9", "bobs")

    assert alice.get("/evaluator/consent").json()["consents"] == []
    refused = alice.put("/evaluator/consent", json={"text_version": "v1", "source_ids": ["bobs"]})
    assert refused.status_code == 422 and "source bobs is not yours" in refused.text
    granted = alice.put("/evaluator/consent", json={"text_version": "v1", "source_ids": ["support"]})
    assert granted.status_code == 200 and granted.json()["source_ids"] == ["support"]

    for name in ("alice", "carol", "dave"):
        operator(stack, "reviewers", "add", name)
    operator(stack, "policy", "--agreeing-reviews", "2")
    assert operator(stack, "collect") == {"added": 4}

    queue = carol.get("/evaluator/review-queue", params={"limit": 50}).json()
    assert len(queue) == 4 and SECRET not in json.dumps(queue)
    assert all(item["context_a"].startswith("System: You are a support agent.") for item in queue)
    assert alice.get("/evaluator/review-queue").json() == []
    own = alice.post("/evaluator/reviews", json={"comparison_id": queue[0]["comparison_id"], "verdict": "better"})
    assert own.status_code == 403 and "independent review" in own.text

    assert len(review_all(carol)) == 4
    again = carol.post("/evaluator/reviews", json={"comparison_id": queue[0]["comparison_id"], "verdict": "worse"})
    assert again.status_code == 409 and "reviews a comparison once" in again.text
    assert len(review_all(dave)) == 4

    stats = operator(stack, "stats")
    assert stats["stats"]["by_status"]["admitted"] == 4
    groups = sorted(stats["stats"]["admitted_task_groups"])
    assert len(groups) == 2

    frozen = operator(stack, "freeze", "core", "--task-group", groups[0])
    assert (frozen["version"], frozen["size"], frozen["trace_count"]) == (1, 1, 1)
    assert len(frozen["content_hash"]) == 64
    overlap = stash_rm("evaluator", "freeze", "other", "--task-group", groups[0], env=stack.env)
    assert overlap.returncode == 1 and "benchmarks are disjoint" in overlap.stderr
    empty = stash_rm("evaluator", "freeze", "empty", "--task-group", "no-such-group", env=stack.env)
    assert empty.returncode == 1 and "empty benchmark" in empty.stderr

    snapshot = operator(stack, "snapshot")
    assert (snapshot["size"], snapshot["held_out"]) == (1, 3)
    (line,) = snapshot_lines(stack, profile, snapshot["object_key"])
    assert len(line["trace_ids"]) == 1 and line["trace_ids"][0] in (first, second)
    assert SECRET not in json.dumps(line)

    revoked = alice.delete("/evaluator/consent")
    assert revoked.status_code == 200 and revoked.json()["revoked_by"]
    mine = alice.get("/evaluator/consent").json()
    assert mine["contributed_comparisons"] == 4 and mine["stopped_at"]
    after = stash_rm("evaluator", "snapshot", env=stack.env)
    assert after.returncode == 1 and "empty snapshot" in after.stderr
    assert carol.get("/evaluator/review-queue").json() == []

    actions = operator(stack, "actions")
    assert {a["action"] for a in actions} >= {"name_reviewer", "collect_corpus", "freeze_benchmark", "take_snapshot"}
    assert {a["actor_id"] for a in actions} == {"ann"} and all(a["at"] for a in actions)
