"""S3ObjectStore against a real S3-compatible HTTP server (moto's server mode)."""

from __future__ import annotations

import socket
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import boto3
import httpx
import pytest

from stash_common.errors import InvalidArgument, NotFound, Unavailable
from stash_common.storage import S3ObjectStore


@pytest.fixture
def store(s3_bucket: str, s3_endpoint_url: str) -> S3ObjectStore:
    return S3ObjectStore(s3_bucket, s3_endpoint_url, "us-east-1", prefix="stash/")


def test_get_returns_bytes_after_put(store: S3ObjectStore) -> None:
    store.put("models/7/checkpoint.tar", b"\x00weights\xff")
    assert store.get("models/7/checkpoint.tar") == b"\x00weights\xff"


def test_put_stores_object_under_prefix(store: S3ObjectStore, s3_bucket: str, s3_endpoint_url: str) -> None:
    store.put("jobs/1/spec.json", b"{}")
    client = boto3.client("s3", endpoint_url=s3_endpoint_url, region_name="us-east-1")
    listed = client.list_objects_v2(Bucket=s3_bucket)["Contents"]
    assert [item["Key"] for item in listed] == ["stash/jobs/1/spec.json"]


def test_download_writes_object_when_put_from_file(store: S3ObjectStore, tmp_path: Path) -> None:
    source = tmp_path / "archive.tar"
    source.write_bytes(b"checkpoint" * 1_000_000)  # past upload_file's 8 MiB multipart threshold
    store.put_file("models/3/checkpoint.tar", source)
    target = tmp_path / "out" / "checkpoint.tar"
    store.download("models/3/checkpoint.tar", target)
    assert target.read_bytes() == source.read_bytes()


def test_get_raises_not_found_when_key_missing(store: S3ObjectStore) -> None:
    with pytest.raises(NotFound, match="models/404/checkpoint.tar"):
        store.get("models/404/checkpoint.tar")


def test_download_raises_not_found_when_key_missing(store: S3ObjectStore, tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="missing.bin"):
        store.download("missing.bin", tmp_path / "missing.bin")


def test_exists_follows_put_and_delete(store: S3ObjectStore) -> None:
    assert not store.exists("a/b.txt")
    store.put("a/b.txt", b"x")
    assert store.exists("a/b.txt")
    store.delete("a/b.txt")
    assert not store.exists("a/b.txt")


def test_delete_succeeds_when_key_missing(store: S3ObjectStore) -> None:
    store.delete("never/stored.txt")
    store.delete("never/stored.txt")


def test_put_raises_invalid_argument_when_key_unsafe(store: S3ObjectStore) -> None:
    with pytest.raises(InvalidArgument, match="'..'"):
        store.put("../other-prefix/x", b"x")


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
