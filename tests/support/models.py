"""What an end-to-end stack needs to train and score reward models offline: S3, the packaged MiniLM, rated traces."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

import boto3
import httpx
import orjson

from support.ingest import stash_line

TRAINING_WAIT_S = 240

# The tests' S3-compatible server takes any credentials; the services read them from the environment.
S3_ENV = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1"}


@dataclass(frozen=True)
class TrainedModel:
    """A reward model trained once per session on the cluster stack, for the modules that only need a trained
    model: its owner's key, the rated traces it trained on, the answer to its creation and its finished detail."""

    owner_key: str
    trace_ids: list[str]
    created: dict[str, Any]
    model: dict[str, Any]


def s3_client(endpoint_url: str) -> Any:
    """A boto3 S3 client of the tests' server."""
    return boto3.client(
        "s3",
        endpoint_url=endpoint_url,
        aws_access_key_id=S3_ENV["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=S3_ENV["AWS_SECRET_ACCESS_KEY"],
        region_name=S3_ENV["AWS_DEFAULT_REGION"],
    )


def new_bucket(endpoint_url: str, prefix: str) -> str:
    """A new, empty bucket on the tests' server."""
    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    s3_client(endpoint_url).create_bucket(Bucket=name)
    return name


def offline_training_env(bucket: str, endpoint_url: str) -> dict[str, str]:
    """Checkpoints in `bucket`, training on the packaged MiniLM on the CPU (the cluster default is Qwen3-0.6B).

    The CPU is pinned so that `metrics.device == "cpu"` holds on a CUDA host too.
    """
    return {
        "STASH_TRAINER_BASE_MODEL": "sentence-transformers/all-MiniLM-L6-v2",
        "STASH_TRAINER_MAX_LENGTH": "128",
        "STASH_TRAINER_DEVICE": "cpu",
        "STASH_S3_BUCKET": bucket,
        "STASH_S3_ENDPOINT_URL": endpoint_url,
        "STASH_S3_REGION": S3_ENV["AWS_DEFAULT_REGION"],
        **S3_ENV,
    }


def rated_traces(client: httpx.Client, count: int, prefix: str = "rated") -> list[str]:
    """Traces whose lookup call is rated + and whose answer is rated −: one explicit action pair each."""
    trace_ids = []
    for number in range(count):
        trace = orjson.loads(stash_line(f"{prefix}-{number}"))
        trace["steps"][1]["content"] = f"I want a refund for order {1100 + number}"
        imported = client.post("/traces/import", json={"format": "stash", "data": orjson.dumps(trace).decode()})
        assert imported.status_code == 200, imported.text
        trace_id = imported.json()["trace_ids"][0]
        steps = client.get(f"/traces/{trace_id}").json()["steps"]
        for step, rating in ((steps[2], 1), (steps[4], -1)):
            response = client.post(f"/traces/{trace_id}/annotations", json={"step_id": step["id"], "rating": rating})
            assert response.status_code == 201, response.text
        trace_ids.append(trace_id)
    return trace_ids


def finished_model(client: httpx.Client, model_id: str) -> dict[str, Any]:
    """The reward model's detail once its training succeeded or failed."""
    deadline = time.monotonic() + TRAINING_WAIT_S
    while time.monotonic() < deadline:
        model: dict[str, Any] = client.get(f"/reward-models/{model_id}").json()
        if model["status"] in ("succeeded", "failed"):
            return model
        time.sleep(0.5)
    raise TimeoutError(f"reward model {model_id} did not finish within {TRAINING_WAIT_S}s")
