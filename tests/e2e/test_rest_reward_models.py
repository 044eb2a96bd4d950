"""Reward models end to end on the cluster profile: real training on the packaged model, S3, signed downloads."""

import io
import tarfile
import time
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from stash_common.training_metrics import TRAINING_METRIC_KEYS
from support.ingest import stash_line
from support.models import new_bucket, offline_training_env, s3_client
from support.stack import RunningStack, cluster_env, running_stack

TRAINING_WAIT_S = 240


@pytest.fixture(scope="module")
def bucket(s3_endpoint_url: str) -> str:
    return new_bucket(s3_endpoint_url, "stash-models")


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory,
    module_postgres_url: str,
    module_redis_url: str,
    s3_endpoint_url: str,
    bucket: str,
) -> Iterator[RunningStack]:
    with running_stack(
        tmp_path_factory.mktemp("models"),
        **cluster_env(module_postgres_url, module_redis_url),
        **offline_training_env(bucket, s3_endpoint_url),
    ) as running:
        yield running


def _rated_traces(client: httpx.Client, count: int) -> list[str]:
    """Traces whose lookup call is rated + and whose answer is rated −: one explicit pair each."""
    trace_ids = []
    for number in range(count):
        trace = orjson.loads(stash_line(f"rated-{number}"))
        trace["steps"][1]["content"] = f"I want a refund for order {1100 + number}"
        imported = client.post("/traces/import", json={"format": "stash", "data": orjson.dumps(trace).decode()})
        trace_id = imported.json()["trace_ids"][0]
        steps = client.get(f"/traces/{trace_id}").json()["steps"]
        for step, rating in ((steps[2], 1), (steps[4], -1)):
            response = client.post(f"/traces/{trace_id}/annotations", json={"step_id": step["id"], "rating": rating})
            assert response.status_code == 201, response.text
        trace_ids.append(trace_id)
    return trace_ids


def _finished(client: httpx.Client, model_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + TRAINING_WAIT_S
    while time.monotonic() < deadline:
        model = client.get(f"/reward-models/{model_id}").json()
        if model["status"] in ("succeeded", "failed"):
            return model
        time.sleep(0.5)
    raise TimeoutError(f"reward model {model_id} did not finish within {TRAINING_WAIT_S}s")


@pytest.fixture(scope="module")
def trained(alice: httpx.Client) -> dict[str, Any]:
    trace_ids = _rated_traces(alice, 4)
    created = alice.post("/reward-models", json={"name": "refunds", "trace_ids": trace_ids, "epochs": 2})
    assert created.status_code == 200, created.text
    assert created.json()["status"] == "queued" and created.json()["trace_count"] == 4
    return _finished(alice, created.json()["id"])


def test_a_model_trains_on_explicit_ratings(trained: dict[str, Any]) -> None:
    assert trained["status"] == "succeeded", trained["error"]
    metrics = trained["metrics"]
    assert set(metrics) == TRAINING_METRIC_KEYS
    # Each trace's + and − actions make one pair within the trace; the 4 × 4 cross pairs span traces.
    assert trained["num_pairs"] == 16
    assert metrics["train_pairs"] + metrics["eval_pairs"] + metrics["excluded_cross_trace_pairs"] == 16
    assert metrics["eval_split"] == "trace" and metrics["epochs"] == 2 and metrics["device"] == "cpu"
    assert metrics["final_loss"] > 0 and metrics["seconds"] > 0
    assert metrics["action_scoring_version"] == 1
    assert trained["feedback"] is None  # no provider configured: no extraction was recorded
    progress = trained["progress"]
    assert progress["stage"] == "done"
    assert progress["step"] == progress["total_steps"] > 0 and progress["loss"] > 0


def test_the_checkpoint_is_in_s3_and_the_signed_url_downloads_it(
    alice: httpx.Client, bob: httpx.Client, trained: dict[str, Any], bucket: str, s3_endpoint_url: str, stack: Any
) -> None:
    owner_id = alice.get("/me").json()["user_id"]
    key = f"reward-models/{owner_id}/{trained['id']}.tar.gz"
    s3 = s3_client(s3_endpoint_url)
    assert s3.head_object(Bucket=bucket, Key=key)["ContentLength"] > 1_000_000

    weights = alice.get(f"/reward-models/{trained['id']}/weights").json()
    archive = httpx.get(weights["url"], timeout=60)

    assert archive.status_code == 200
    names = tarfile.open(fileobj=io.BytesIO(archive.content)).getnames()
    assert {"model/config.json", "model/reward_stats.json", "model/action_reward_stats.json"} <= set(names)
    assert bob.get(f"/reward-models/{trained['id']}/weights").status_code == 404


def test_pairs_export_and_the_owner_only_routes(alice: httpx.Client, bob: httpx.Client, trained: dict) -> None:
    lines = [orjson.loads(line) for line in alice.get("/export/pairs").text.splitlines()]

    assert len(lines) == 16
    assert set(lines[0]) == {"chosen", "rejected", "trace_ids", "granularity", "action_type"}
    assert all(line["granularity"] == "action" for line in lines)
    assert bob.get("/export/pairs").text == ""
    assert bob.get(f"/reward-models/{trained['id']}").status_code == 404
    assert [model["id"] for model in bob.get("/reward-models").json()] == []
    assert alice.post(f"/reward-models/{trained['id']}/retry").status_code == 409


def test_a_foreign_trace_is_404_naming_it(alice: httpx.Client, bob: httpx.Client) -> None:
    (bobs,) = _rated_traces(bob, 1)

    response = alice.post("/reward-models", json={"name": "stolen", "trace_ids": [bobs]})

    assert response.status_code == 404
    assert bobs in response.text


def test_too_few_pairs_fails_with_an_actionable_error_and_retry_keeps_the_model(alice: httpx.Client) -> None:
    lonely = alice.post("/traces/import", json={"format": "stash", "data": stash_line("lonely")}).json()["trace_ids"]

    created = alice.post("/reward-models", json={"name": "too small", "trace_ids": lonely}).json()
    failed = _finished(alice, created["id"])

    assert failed["status"] == "failed"
    assert "0 preference pairs" in failed["error"] or "no preference pair" in failed["error"]
    assert alice.get(f"/reward-models/{created['id']}/weights").status_code == 404
    retried = alice.post(f"/reward-models/{created['id']}/retry")
    assert retried.status_code == 202
    assert (retried.json()["id"], retried.json()["status"]) == (created["id"], "queued")
    assert _finished(alice, created["id"])["status"] == "failed"
    assert alice.get(f"/reward-models/{created['id']}").json()["trace_ids"] == lonely


def test_bad_training_settings_are_422(alice: httpx.Client) -> None:
    trace_ids = alice.get("/traces").json()["traces"][0]["id"]
    bad_config = {"name": "x", "trace_ids": [trace_ids], "training_config": {"input_version": 2}}

    assert alice.post("/reward-models", json=bad_config).status_code == 422
    assert alice.post("/reward-models", json={"name": "x", "trace_ids": []}).status_code == 422
    assert alice.post("/reward-models", json={"name": "x", "trace_ids": [trace_ids], "epochs": 0}).status_code == 422
