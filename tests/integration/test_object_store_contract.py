"""The object-store contract, held by both backends through the same tests: the local directory
(embedded profile) and S3 on the tests' S3-compatible server (cluster profile).

What only one backend does (the local store's signed URLs and file layout, S3's key prefix and
presigned lifetimes) is tested beside it, in common/tests/test_storage.py and test_s3_storage.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from stash_common.errors import InvalidArgument, NotFound
from stash_common.storage import LocalObjectStore, ObjectStore, S3ObjectStore

# Past boto3 upload_file's 8 MiB multipart threshold, so S3 takes its multipart path.
LARGE_OBJECT = b"checkpoint" * 1_000_000


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    if request.param == "local":
        return LocalObjectStore(tmp_path / "objects", "http://stash.example", b"k" * 32)
    bucket, endpoint = request.getfixturevalue("s3_bucket"), request.getfixturevalue("s3_endpoint_url")
    return S3ObjectStore(bucket, endpoint, "us-east-1", prefix="stash/")


def test_get_returns_bytes_after_put(store: ObjectStore) -> None:
    store.put("models/7/checkpoint.tar", b"\x00weights\xff")
    assert store.get("models/7/checkpoint.tar") == b"\x00weights\xff"


def test_put_replaces_object_when_key_exists(store: ObjectStore) -> None:
    store.put("jobs/1/spec.json", b"old")
    store.put("jobs/1/spec.json", b"new")
    assert store.get("jobs/1/spec.json") == b"new"


def test_download_writes_object_when_put_from_file(store: ObjectStore, tmp_path: Path) -> None:
    source = tmp_path / "archive.tar"
    source.write_bytes(LARGE_OBJECT)
    store.put_file("models/3/checkpoint.tar", source)
    target = tmp_path / "out" / "nested" / "checkpoint.tar"
    store.download("models/3/checkpoint.tar", target)
    assert target.read_bytes() == LARGE_OBJECT


def test_get_raises_not_found_when_key_missing(store: ObjectStore) -> None:
    with pytest.raises(NotFound, match="models/404/checkpoint.tar"):
        store.get("models/404/checkpoint.tar")


def test_download_raises_not_found_when_key_missing(store: ObjectStore, tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="missing.bin"):
        store.download("missing.bin", tmp_path / "missing.bin")
    assert not (tmp_path / "missing.bin").exists()


def test_exists_follows_put_and_delete(store: ObjectStore) -> None:
    assert not store.exists("a/b.txt")
    store.put("a/b.txt", b"x")
    assert store.exists("a/b.txt")
    store.delete("a/b.txt")
    assert not store.exists("a/b.txt")


def test_delete_succeeds_when_key_missing(store: ObjectStore) -> None:
    store.delete("never/stored.txt")
    store.delete("never/stored.txt")


def test_put_raises_invalid_argument_when_key_unsafe(store: ObjectStore) -> None:
    with pytest.raises(InvalidArgument, match="'..'"):
        store.put("../other-prefix/x", b"x")
