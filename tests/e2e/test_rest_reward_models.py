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
from support.models import TRAINING_WAIT_S, TrainedModel, finished_model, rated_traces, s3_client
from support.stack import RunningStack


@pytest.fixture(scope="module")
def stack(cluster_stack: RunningStack) -> RunningStack:
    return cluster_stack.for_module("models")


@pytest.fixture(scope="module")
def bucket(stack: RunningStack) -> str:
    return stack.env["STASH_S3_BUCKET"]


@pytest.fixture(scope="module")
def alice(stack: RunningStack, trained_model: TrainedModel) -> Iterator[httpx.Client]:
    """The owner of the session's trained model."""
    with stack.client(trained_model.owner_key) as client:
        yield client


@pytest.fixture(scope="module")
def trained(trained_model: TrainedModel) -> dict[str, Any]:
    """The session's model: four traces with one explicit pair each, two epochs."""
    created = trained_model.created
    assert created["status"] == "queued" and created["trace_count"] == 4
    return trained_model.model


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
    quality = trained["quality"]
    assert quality["eval"]["pairs"] == metrics["eval_pairs"] < quality["min_eval_pairs"]
    assert quality["eval"]["measured"] is False and "too few held-out pairs to measure" in quality["eval"]["summary"]
    assert quality["loss"]["final"] == metrics["final_loss"]
    assert quality["loss"]["chance"] == pytest.approx(0.6931, abs=1e-4)
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
    (bobs,) = rated_traces(bob, 1)
    (own,) = rated_traces(alice, 1, prefix="own")

    response = alice.post("/reward-models", json={"name": "stolen", "trace_ids": [own, bobs]})

    assert response.status_code == 404
    assert bobs in response.text


def test_too_few_pairs_fails_with_an_actionable_error_and_retry_keeps_the_model(alice: httpx.Client) -> None:
    lonely = [
        alice.post("/traces/import", json={"format": "stash", "data": stash_line(name)}).json()["trace_ids"][0]
        for name in ("lonely", "lonely-too")
    ]

    created = alice.post("/reward-models", json={"name": "too small", "trace_ids": lonely}).json()
    failed = finished_model(alice, created["id"])

    assert failed["status"] == "failed"
    assert "0 preference pairs" in failed["error"] or "no preference pair" in failed["error"]
    assert failed["retryable"]  # rating actions of these traces lets the same model train
    assert alice.get(f"/reward-models/{created['id']}/weights").status_code == 404
    retried = alice.post(f"/reward-models/{created['id']}/retry")
    assert retried.status_code == 202
    assert (retried.json()["id"], retried.json()["status"]) == (created["id"], "queued")
    assert finished_model(alice, created["id"])["status"] == "failed"
    assert alice.get(f"/reward-models/{created['id']}").json()["trace_ids"] == lonely


def test_bad_training_settings_are_422(alice: httpx.Client) -> None:
    trace_ids = [trace["id"] for trace in alice.get("/traces").json()["traces"][:2]]
    bad_config = {"name": "x", "trace_ids": trace_ids, "training_config": {"input_version": 2}}

    assert alice.post("/reward-models", json=bad_config).status_code == 422
    assert alice.post("/reward-models", json={"name": "x", "trace_ids": []}).status_code == 422
    single = alice.post("/reward-models", json={"name": "x", "trace_ids": trace_ids[:1]})
    assert single.status_code == 422
    assert single.json()["detail"] == (
        "trace_ids: select 2 to 10000 traces, not 1: evaluation holds out whole traces, so training needs at least two"
    )
    assert alice.post("/reward-models", json={"name": "x", "trace_ids": trace_ids, "epochs": 0}).status_code == 422


def _learned(client: httpx.Client, trace_id: str, model_id: str) -> list[dict[str, Any]]:
    """The trace's scores, action scores and scoring runs of one model."""
    detail = client.get(f"/traces/{trace_id}").json()
    found = (*detail["scores"], *detail["action_scores"], *detail["scoring_runs"])
    return [item for item in found if item["reward_model_id"] == model_id]


def test_a_model_is_deleted_once_settled_with_its_checkpoint_and_learned_scores(
    alice: httpx.Client, bob: httpx.Client, bucket: str, s3_endpoint_url: str
) -> None:
    trace_ids = rated_traces(alice, 2, prefix="deleted")
    created = alice.post("/reward-models", json={"name": "to delete", "trace_ids": trace_ids}).json()
    early = alice.delete(f"/reward-models/{created['id']}")
    assert finished_model(alice, created["id"])["status"] == "succeeded"
    deadline = time.monotonic() + TRAINING_WAIT_S
    while not _learned(alice, trace_ids[0], created["id"]) and time.monotonic() < deadline:
        time.sleep(0.5)  # the trainer publishes the training job's scores right after the model succeeded
    assert _learned(alice, trace_ids[0], created["id"])
    key = f"reward-models/{alice.get('/me').json()['user_id']}/{created['id']}.tar.gz"

    foreign = bob.delete(f"/reward-models/{created['id']}")
    deleted = alice.delete(f"/reward-models/{created['id']}")

    assert early.status_code == 409 and "it can be deleted once it succeeded or failed" in early.json()["detail"]
    assert (foreign.status_code, deleted.status_code) == (404, 204)
    assert alice.get(f"/reward-models/{created['id']}").status_code == 404
    assert created["id"] not in [model["id"] for model in alice.get("/reward-models").json()]
    assert all(_learned(alice, trace_id, created["id"]) == [] for trace_id in trace_ids)
    assert "Contents" not in s3_client(s3_endpoint_url).list_objects_v2(Bucket=bucket, Prefix=key)
    assert alice.delete(f"/reward-models/{created['id']}").status_code == 404
