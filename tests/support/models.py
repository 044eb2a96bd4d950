"""What an end-to-end stack needs to train and score reward models offline: S3 and the packaged MiniLM."""

from __future__ import annotations

import uuid
from typing import Any

import boto3

# The tests' S3-compatible server takes any credentials; the services read them from the environment.
S3_ENV = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1"}


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
