"""S3ObjectStore against a real S3-compatible HTTP server (moto's server mode)."""

from __future__ import annotations

import socket
from urllib.parse import parse_qs, urlsplit

import boto3
import httpx
import pytest

from stash_common.errors import Unavailable
from stash_common.storage import S3ObjectStore


@pytest.fixture
def store(s3_bucket: str, s3_endpoint_url: str) -> S3ObjectStore:
    return S3ObjectStore(s3_bucket, s3_endpoint_url, "us-east-1", prefix="stash/")


def test_put_stores_object_under_prefix(store: S3ObjectStore, s3_bucket: str, s3_endpoint_url: str) -> None:
    store.put("jobs/1/spec.json", b"{}")
    client = boto3.client("s3", endpoint_url=s3_endpoint_url, region_name="us-east-1")
    listed = client.list_objects_v2(Bucket=s3_bucket)["Contents"]
    assert [item["Key"] for item in listed] == ["stash/jobs/1/spec.json"]


def test_get_raises_unavailable_when_server_unreachable(s3_bucket: str) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed_port = sock.getsockname()[1]
    store = S3ObjectStore(s3_bucket, f"http://127.0.0.1:{closed_port}", "us-east-1")
    with pytest.raises(Unavailable, match=s3_bucket):
        store.get("models/7/checkpoint.tar")


def test_presigned_url_serves_object_over_http(store: S3ObjectStore) -> None:
    store.put("models/7/checkpoint.tar", b"weights" * 10_000)
    response = httpx.get(store.presign("models/7/checkpoint.tar"), timeout=10)
    assert response.status_code == 200
    assert response.content == b"weights" * 10_000


def test_presign_signs_requested_lifetime(store: S3ObjectStore) -> None:
    query = parse_qs(urlsplit(store.presign("models/7/checkpoint.tar", expires_s=120)).query)
    assert query["X-Amz-Expires"] == ["120"]
    assert query["X-Amz-SignedHeaders"] == ["host"]
