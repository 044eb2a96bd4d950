"""LocalObjectStore on a real directory, signed URLs served over real HTTP, and signing keys."""

from __future__ import annotations

import stat
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import httpx
import pytest

from stash_common.errors import ConfigError, InvalidArgument, NotFound, PermissionDenied, StashError, http_status
from stash_common.storage import (
    ARTIFACTS_ROUTE,
    LocalObjectStore,
    load_signing_key,
    validate_key,
    verify_signed_request,
)

SIGNING_KEY = b"k" * 32
PUBLIC_URL = "http://stash.example"


@pytest.fixture
def store(tmp_path: Path) -> LocalObjectStore:
    return LocalObjectStore(tmp_path / "objects", PUBLIC_URL, SIGNING_KEY)


def signed_query(url: str) -> tuple[str, str, str]:
    """The key, expires and signature a gateway would read from a presigned URL."""
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    key = unquote(parts.path.removeprefix(ARTIFACTS_ROUTE + "/"))
    return key, query["expires"][0], query["signature"][0]


def test_put_leaves_no_temporary_files_when_done(store: LocalObjectStore) -> None:
    store.put("jobs/1/spec.json", b"{}")
    store.put_file("jobs/1/pairs.jsonl", _write(store.root.parent / "pairs.jsonl", b"[]"))
    assert sorted(p.name for p in (store.root / "jobs/1").iterdir()) == ["pairs.jsonl", "spec.json"]


def test_exists_is_false_when_key_is_a_directory(store: LocalObjectStore) -> None:
    store.put("models/1/checkpoint.tar", b"x")
    assert not store.exists("models/1")
    with pytest.raises(NotFound):
        store.get("models/1")


@pytest.mark.parametrize("key", ["a", "models/7/checkpoint.tar", "jobs/run-1_x/v1.2.json", ".hidden/..x"])
def test_validate_key_accepts_key_when_relative_and_plain(key: str) -> None:
    validate_key(key)


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("", "empty"),
        ("/etc/passwd", "starts with '/'"),
        ("a/../../etc/passwd", "'..'"),
        ("..", "'..'"),
        ("a//b", "empty"),
        ("a/b/", "empty"),
        ("a/./b", "'.'"),
        ("a\\b", "backslash"),
        ("a b", "may only contain"),
        ("caf\u00e9", "may only contain"),
        ("a?b=1", "may only contain"),
        ("x" * 1025, "limit is 1024"),
    ],
)
def test_validate_key_raises_invalid_argument_when_key_unsafe(key: str, reason: str) -> None:
    with pytest.raises(InvalidArgument, match=reason) as info:
        validate_key(key)
    assert info.value.field == "key"


def test_put_raises_invalid_argument_when_key_escapes_root(store: LocalObjectStore, tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument):
        store.put("../escaped.txt", b"x")
    assert not (tmp_path / "escaped.txt").exists()


def test_path_for_returns_file_under_root_when_key_valid(store: LocalObjectStore) -> None:
    assert store.path_for("models/7/checkpoint.tar") == store.root / "models" / "7" / "checkpoint.tar"


def test_presign_points_at_gateway_artifact_route(store: LocalObjectStore) -> None:
    url = store.presign("models/7/checkpoint.tar", expires_s=60)
    assert url.startswith(f"{PUBLIC_URL}{ARTIFACTS_ROUTE}/models/7/checkpoint.tar?expires=")
    assert "&signature=" in url


def test_verify_signed_request_accepts_url_when_untampered(store: LocalObjectStore) -> None:
    key, expires, signature = signed_query(store.presign("models/7/checkpoint.tar"))
    verify_signed_request(key, expires, signature, SIGNING_KEY)


@pytest.mark.parametrize(
    ("tamper", "reason"),
    [
        (lambda k, e, s: (k, e, s[:-1] + ("0" if s[-1] != "0" else "1")), "signature does not match"),
        (lambda k, e, s: ("models/8/checkpoint.tar", e, s), "signature does not match"),
        (lambda k, e, s: (k, str(int(e) + 3600), s), "signature does not match"),
        (lambda k, e, s: (k, e, ""), "signature does not match"),
        (lambda k, e, s: (k, e, "\u00e9" * 64), "signature does not match"),
    ],
    ids=["signature", "key", "expires", "empty-signature", "non-ascii-signature"],
)
def test_verify_signed_request_raises_permission_denied_when_tampered(
    store: LocalObjectStore, tamper: Callable[[str, str, str], tuple[str, str, str]], reason: str
) -> None:
    key, expires, signature = tamper(*signed_query(store.presign("models/7/checkpoint.tar")))
    with pytest.raises(PermissionDenied, match=reason):
        verify_signed_request(key, expires, signature, SIGNING_KEY)


def test_verify_signed_request_raises_permission_denied_when_signing_key_differs(store: LocalObjectStore) -> None:
    key, expires, signature = signed_query(store.presign("models/7/checkpoint.tar"))
    with pytest.raises(PermissionDenied, match="signature does not match"):
        verify_signed_request(key, expires, signature, b"another key")


def test_verify_signed_request_raises_permission_denied_when_expired(store: LocalObjectStore) -> None:
    key, expires, signature = signed_query(store.presign("models/7/checkpoint.tar", expires_s=60))
    verify_signed_request(key, expires, signature, SIGNING_KEY, now=int(expires) - 1)
    with pytest.raises(PermissionDenied, match="expired"):
        verify_signed_request(key, expires, signature, SIGNING_KEY, now=int(expires) + 1)


def test_load_signing_key_creates_private_file_when_none_configured(tmp_path: Path) -> None:
    key = load_signing_key(tmp_path / "data", None)
    path = tmp_path / "data" / "signing.key"
    assert len(key) == 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["signing.key"]


def test_load_signing_key_reuses_file_when_called_again(tmp_path: Path) -> None:
    first = load_signing_key(tmp_path, None)
    assert load_signing_key(tmp_path, None) == first
    assert load_signing_key(tmp_path, "") == first


def test_load_signing_key_differs_when_data_dirs_differ(tmp_path: Path) -> None:
    assert load_signing_key(tmp_path / "one", None) != load_signing_key(tmp_path / "two", None)


def test_load_signing_key_uses_configured_value_when_given(tmp_path: Path) -> None:
    assert load_signing_key(tmp_path, "00ff10") == b"\x00\xff\x10"
    assert load_signing_key(tmp_path, "not hex at all") == b"not hex at all"
    assert not (tmp_path / "signing.key").exists()


def test_load_signing_key_raises_config_error_when_file_corrupt(tmp_path: Path) -> None:
    (tmp_path / "signing.key").write_text("garbage")
    with pytest.raises(ConfigError, match="signing.key"):
        load_signing_key(tmp_path, None)


class ArtifactHandler(BaseHTTPRequestHandler):
    """What the gateway's GET /api/v1/rm/artifacts/{key:path} does, on the stdlib server."""

    store: LocalObjectStore

    def do_GET(self) -> None:
        key, expires, signature = signed_query(self.path)
        try:
            verify_signed_request(key, expires, signature, SIGNING_KEY)
            body = self.store.get(key)
        except StashError as exc:
            self._reply(http_status(exc.code), exc.message.encode())
            return
        self._reply(200, body)

    def _reply(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def served_store(tmp_path: Path) -> Iterator[LocalObjectStore]:
    """A LocalObjectStore whose public URL is a live HTTP server serving its signed URLs."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), ArtifactHandler)
    store = LocalObjectStore(tmp_path / "objects", f"http://127.0.0.1:{server.server_address[1]}", SIGNING_KEY)
    ArtifactHandler.store = store
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield store
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


def test_presigned_url_serves_object_over_http(served_store: LocalObjectStore) -> None:
    served_store.put("models/7/checkpoint.tar", b"weights" * 10_000)
    response = httpx.get(served_store.presign("models/7/checkpoint.tar"), timeout=10)
    assert response.status_code == 200
    assert response.content == b"weights" * 10_000


def test_presigned_url_refused_over_http_when_tampered(served_store: LocalObjectStore) -> None:
    served_store.put("models/7/checkpoint.tar", b"weights")
    served_store.put("models/8/checkpoint.tar", b"someone else's")
    url = served_store.presign("models/7/checkpoint.tar").replace("models/7/", "models/8/")
    response = httpx.get(url, timeout=10)
    assert response.status_code == 403
    assert "signature does not match" in response.text


def test_presigned_url_refused_over_http_when_expired(served_store: LocalObjectStore) -> None:
    served_store.put("models/7/checkpoint.tar", b"weights")
    response = httpx.get(served_store.presign("models/7/checkpoint.tar", expires_s=-1), timeout=10)
    assert response.status_code == 403
    assert "expired" in response.text


def _write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path
