"""The shared evaluator's data end to end on both profiles: consent isolation, independent review (REST and the
CLI), immutable benchmark versions held out of snapshots, revocation, the operator's CLI and its audit trail; six
real processes each time."""

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


def prefers_the_lookup(item: dict[str, Any]) -> str:
    """The verdict on A of a reviewer who prefers the lookup call."""
    return "better" if "called lookup_order" in item["action_a"] else "worse"


def review_all(client: httpx.Client) -> list[str]:
    """Review every queued comparison through REST, preferring the lookup call; the reviewed ids."""
    reviewed = []
    for item in client.get("/evaluator/review-queue", params={"limit": 50}).json():
        body = {"comparison_id": item["comparison_id"], "verdict": prefers_the_lookup(item)}
        assert client.post("/evaluator/reviews", json=body).status_code == 201
        reviewed.append(item["comparison_id"])
    return reviewed


def as_account(stack: RunningStack, key: str, *args: str) -> Any:
    """`stash-rm evaluator ...` with an account's API key; its JSON answer."""
    result = stash_rm("evaluator", *args, "--key", key, env=stack.env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def review_all_on_the_command_line(stack: RunningStack, key: str) -> int:
    """Review every queued comparison with `stash-rm evaluator review`, preferring the lookup call; how many."""
    queue = as_account(stack, key, "review", "queue", "--limit", "50")
    for item in queue:
        assert as_account(stack, key, "review", "record", item["comparison_id"], prefers_the_lookup(item))["review_id"]
    return len(queue)


def snapshot_lines(stack: RunningStack, profile: str, key: str) -> list[dict[str, Any]]:
    if profile == "cluster":
        body = s3_client(stack.env["STASH_S3_ENDPOINT_URL"]).get_object(Bucket=stack.env["STASH_S3_BUCKET"], Key=key)
        text = body["Body"].read().decode()
    else:
        text = (stack.data_dir / "artifacts" / key).read_text()
    return [json.loads(line) for line in text.splitlines()]


def test_consent_review_benchmark_snapshot_and_revocation(stack: RunningStack, profile: str) -> None:
    keys = {name: stack.create_user(name) for name in ("alice", "bob", "carol", "dave")}
    alice, bob, carol, dave = (stack.client(keys[name]) for name in ("alice", "bob", "carol", "dave"))
    first = rated_trace(alice, "I want a refund for order 1182", "support")
    second = rated_trace(alice, "Where is my parcel 77?", "support")
    rated_trace(bob, f"{SECRET}: refund order 9", "bobs")

    assert alice.get("/evaluator/consent").json()["consents"] == []
    refused = alice.put("/evaluator/consent", json={"text_version": "v1", "source_ids": ["bobs"]})
    assert refused.status_code == 422 and "source bobs is not yours" in refused.text
    assert alice.get("/evaluator/consent").json()["consents"] == []
    granted = as_account(stack, keys["alice"], "consent", "grant", "--text-version", "v1", "--source", "support")
    assert (granted["source_ids"], granted["text_version"]) == (["support"], "v1")
    assert granted["granted_by"] and granted["granted_at"] and not granted.get("revoked_at")

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
    assert review_all_on_the_command_line(stack, keys["dave"]) == 4

    stats = operator(stack, "stats")
    assert stats["stats"]["by_status"]["admitted"] == 4
    assert stats["stats"]["reviews"] == 8  # the refused own and second reviews left nothing
    groups = sorted(stats["stats"]["admitted_task_groups"])
    assert len(groups) == 2

    frozen = operator(stack, "freeze", "core", "--task-group", groups[0])
    assert (frozen["version"], frozen["size"], frozen["trace_count"]) == (1, 1, 1)
    assert len(frozen["content_hash"]) == 64
    assert operator(stack, "freeze", "core", "--task-group", groups[0]) == frozen  # the same content: the same version

    # A new trace in each task group (the first request's case and spacing changed) adds comparisons to both.
    third = rated_trace(alice, "i want a REFUND  for order 1182", "support")
    fourth = rated_trace(alice, "Where is my parcel 77?", "support")
    assert operator(stack, "collect") == {"added": 12}
    assert len(review_all(carol)) == 12 and len(review_all(dave)) == 12
    grown = operator(stack, "freeze", "core", "--task-group", groups[0])
    assert (grown["version"], grown["size"], grown["trace_count"]) == (2, 4, 2)
    assert grown["content_hash"] != frozen["content_hash"]

    overlap = stash_rm("evaluator", "freeze", "other", "--task-group", groups[0], env=stack.env)
    assert overlap.returncode == 1 and "benchmarks are disjoint" in overlap.stderr
    empty = stash_rm("evaluator", "freeze", "empty", "--task-group", "no-such-group", env=stack.env)
    assert empty.returncode == 1 and "empty benchmark" in empty.stderr
    versions = operator(stack, "benchmarks")
    assert [(b["name"], b["version"], b["content_hash"]) for b in versions] == [
        ("core", 1, frozen["content_hash"]),
        ("core", 2, grown["content_hash"]),
    ]

    snapshot = operator(stack, "snapshot")
    assert (snapshot["size"], snapshot["held_out"]) == (4, 12)
    lines = snapshot_lines(stack, profile, snapshot["object_key"])
    trained = {trace for line in lines for trace in line["trace_ids"]}
    assert trained in ({first, third}, {second, fourth})  # the other task group is core's alone
    assert SECRET not in json.dumps(lines)

    revoked = as_account(stack, keys["alice"], "consent", "revoke")
    assert revoked["revoked_by"] and revoked["revoked_at"]
    mine = alice.get("/evaluator/consent").json()
    assert mine["contributed_comparisons"] == 16 and mine["stopped_at"]
    after = stash_rm("evaluator", "snapshot", env=stack.env)
    assert after.returncode == 1 and "empty snapshot" in after.stderr
    later = stash_rm("evaluator", "freeze", "later", "--task-group", groups[1], env=stack.env)
    assert later.returncode == 1 and "empty benchmark" in later.stderr
    assert carol.get("/evaluator/review-queue").json() == [] and dave.get("/evaluator/review-queue").json() == []
    assert operator(stack, "benchmarks") == versions  # frozen versions never change, not even on a revocation
    never = bob.get("/evaluator/consent").json()
    assert (never["consents"], never["contributed_comparisons"]) == ([], 0)

    assert "dave no longer reviews" in operator(stack, "reviewers", "remove", "dave")
    removed = dave.get("/evaluator/review-queue")
    assert removed.status_code == 403 and "only evaluator reviewers" in removed.text

    actions = operator(stack, "actions")
    assert [a["action"] for a in actions].count("freeze_benchmark") == 2
    assert {a["action"] for a in actions} >= {
        "name_reviewer",
        "remove_reviewer",
        "set_agreeing_reviews",
        "collect_corpus",
        "freeze_benchmark",
        "take_snapshot",
    }
    assert {a["actor_id"] for a in actions} == {"ann"} and all(a["at"] for a in actions)
