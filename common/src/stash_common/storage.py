"""Object storage for artifacts: checkpoint archives, job files, exports.

Two backends behind one `ObjectStore` protocol: a local directory (embedded profile) whose
downloads are HMAC-signed gateway URLs, and S3 (cluster profile) with presigned URLs.
Keys are validated the same way for both, so a key that works embedded works on S3.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from stash_common.errors import ConfigError, InvalidArgument, NotFound, PermissionDenied, Unavailable

MAX_KEY_LENGTH = 1024  # S3's own limit, so keys stay portable between backends
SIGNING_KEY_FILE = "signing.key"
# The embedded gateway's admin credential, beside the signing key in the data directory; the CLI reads it.
ADMIN_KEY_FILE = "admin.key"
ARTIFACTS_ROUTE = "/api/v1/rm/artifacts"

_KEY_CHARS = re.compile(r"[A-Za-z0-9._/-]+")


class ObjectStore(Protocol):
    """Where artifacts live; every method takes a key accepted by `validate_key`."""

    def put(self, key: str, data: bytes) -> None:
        """Store `data` under `key`, replacing any previous object."""
        ...

    def put_file(self, key: str, path: Path) -> None:
        """Store the file at `path` under `key`, replacing any previous object."""
        ...

    def get(self, key: str) -> bytes:
        """The object's bytes; raises NotFound naming the key when there is none."""
        ...

    def download(self, key: str, path: Path) -> None:
        """Write the object to `path`; raises NotFound naming the key when there is none."""
        ...

    def exists(self, key: str) -> bool:
        """Whether an object is stored under `key`."""
        ...

    def delete(self, key: str) -> None:
        """Remove the object; deleting a missing key is not an error."""
        ...

    def presign(self, key: str, expires_s: int = 300) -> str:
        """A URL anyone can GET the object from until `expires_s` seconds from now."""
        ...


def validate_key(key: str) -> None:
    """Reject keys that could escape the store or differ between backends.

    A key is relative, '/'-separated, made of [A-Za-z0-9._-] segments, none empty, '.' or '..'.
    """
    if not key:
        raise InvalidArgument("key", "must not be empty")
    if len(key) > MAX_KEY_LENGTH:
        raise InvalidArgument("key", f"is {len(key)} characters long; the limit is {MAX_KEY_LENGTH}")
    if "\\" in key:
        raise InvalidArgument("key", f"{key!r} contains a backslash; separate segments with '/'")
    if key.startswith("/"):
        raise InvalidArgument("key", f"{key!r} starts with '/'; keys are relative, e.g. 'models/7/checkpoint.tar'")
    if not _KEY_CHARS.fullmatch(key):
        raise InvalidArgument("key", f"{key!r} may only contain letters, digits, '.', '_', '-' and '/'")
    for segment in key.split("/"):
        if segment in ("", ".", ".."):
            raise InvalidArgument("key", f"{key!r} has an empty, '.' or '..' segment")


def _signature(key: str, expires: str, signing_key: bytes) -> str:
    """The hex HMAC-SHA256 that authorises a GET of `key` until the unix time `expires`."""
    message = f"{key}\n{expires}".encode()
    return hmac.new(signing_key, message, hashlib.sha256).hexdigest()


def verify_signed_request(key: str, expires: str, signature: str, signing_key: bytes, now: float | None = None) -> None:
    """Check a signed artifact URL's query; raise PermissionDenied saying why it is refused."""
    # Compared as bytes: compare_digest refuses non-ASCII str, and the query is caller input.
    if not hmac.compare_digest(_signature(key, expires, signing_key).encode(), signature.encode()):
        raise PermissionDenied(f"the signature does not match artifact {key!r}; request a new download link")
    try:
        expires_at = int(expires)
    except ValueError:
        raise PermissionDenied(f"expires={expires!r} is not a unix timestamp; request a new download link") from None
    current = time.time() if now is None else now
    if current > expires_at:
        raise PermissionDenied(f"the download link for {key!r} expired at {expires_at}; request a new one")


def load_signing_key(data_dir: Path, configured: str | None) -> bytes:
    """The key that signs local artifact URLs.

    A configured value wins (hex is decoded, anything else used as its UTF-8 bytes). Otherwise
    a random key is created once at `data_dir/signing.key` (mode 0600) and reused, so every
    embedded-profile process on the machine signs and verifies with the same key.
    """
    if configured:
        return _decode_configured_key(configured)
    path = data_dir / SIGNING_KEY_FILE
    create_secret_file(path)
    return _read_signing_key_file(path)


def _decode_configured_key(configured: str) -> bytes:
    try:
        return bytes.fromhex(configured)
    except ValueError:
        return configured.encode()


def create_secret_file(path: Path) -> None:
    """Write 256 random bits as hex to `path` (mode 0600), unless a file is already there."""
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    # mkstemp creates the file with mode 0600; linking it into place fails if another process
    # won the race, so nobody ever reads a half-written key.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".secret-")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_hex(32))
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
    finally:
        os.unlink(tmp)


def _read_signing_key_file(path: Path) -> bytes:
    text = path.read_text().strip()
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) < 16:
        raise ConfigError(f"{path} does not hold a hex signing key; delete it to create a new one")
    return key


class LocalObjectStore:
    """Objects as files under `root`; presigned URLs point at the gateway's artifact route."""

    def __init__(self, root: Path, public_url: str, signing_key: bytes) -> None:
        self.root = root
        self.public_url = public_url.rstrip("/")
        self.signing_key = signing_key

    def path_for(self, key: str) -> Path:
        """The file that holds `key` (validated, so it is always inside `root`)."""
        validate_key(key)
        return self.root / key

    def put(self, key: str, data: bytes) -> None:
        """Store `data` under `key` atomically."""
        with self._replacing(self.path_for(key)) as tmp:
            tmp.write_bytes(data)

    def put_file(self, key: str, path: Path) -> None:
        """Copy the file at `path` under `key` atomically."""
        with self._replacing(self.path_for(key)) as tmp:
            shutil.copyfile(path, tmp)

    def get(self, key: str) -> bytes:
        """The object's bytes; NotFound when there is none."""
        try:
            return self.path_for(key).read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise NotFound(f"artifact {key!r} does not exist") from None

    def download(self, key: str, path: Path) -> None:
        """Copy the object to `path` atomically; NotFound when there is none."""
        source = self.path_for(key)
        if not source.is_file():
            raise NotFound(f"artifact {key!r} does not exist")
        with self._replacing(path) as tmp:
            shutil.copyfile(source, tmp)

    def exists(self, key: str) -> bool:
        """Whether a file is stored under `key`."""
        return self.path_for(key).is_file()

    def delete(self, key: str) -> None:
        """Remove the object if it is there."""
        path = self.path_for(key)
        if path.is_file():
            path.unlink(missing_ok=True)

    def presign(self, key: str, expires_s: int = 300) -> str:
        """A gateway URL for `key`, signed with HMAC-SHA256, valid for `expires_s` seconds."""
        validate_key(key)
        expires = str(int(time.time()) + expires_s)
        signature = _signature(key, expires, self.signing_key)
        return f"{self.public_url}{ARTIFACTS_ROUTE}/{key}?expires={expires}&signature={signature}"

    @staticmethod
    @contextmanager
    def _replacing(target: Path) -> Iterator[Path]:
        # Readers see the old file or the new one, never a partial write.
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        os.close(fd)
        tmp = Path(name)
        try:
            yield tmp
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)


_MISSING_CODES = frozenset({"NoSuchKey", "404", "NotFound"})


class S3ObjectStore:
    """Objects in an S3 bucket (or any S3-compatible server), under an optional key prefix."""

    def __init__(self, bucket: str, endpoint_url: str | None, region: str | None, prefix: str = "") -> None:
        # Imported here: boto3 is slow to import and the embedded profile never needs it.
        import boto3
        from botocore.config import Config

        self.bucket = bucket
        self.prefix = prefix.strip("/")
        if self.prefix:
            validate_key(self.prefix)
        config = Config(signature_version="s3v4", retries={"mode": "standard"})
        self._client: Any = boto3.client("s3", endpoint_url=endpoint_url, region_name=region, config=config)

    def put(self, key: str, data: bytes) -> None:
        """Store `data` under `key`."""
        with self._errors(key):
            self._client.put_object(Bucket=self.bucket, Key=self._object_key(key), Body=data)

    def put_file(self, key: str, path: Path) -> None:
        """Upload the file at `path` under `key` (multipart when it is large)."""
        with self._errors(key):
            self._client.upload_file(str(path), self.bucket, self._object_key(key))

    def get(self, key: str) -> bytes:
        """The object's bytes; NotFound when there is none."""
        with self._errors(key):
            response = self._client.get_object(Bucket=self.bucket, Key=self._object_key(key))
            data: bytes = response["Body"].read()
            return data

    def download(self, key: str, path: Path) -> None:
        """Write the object to `path`; NotFound when there is none."""
        path.parent.mkdir(parents=True, exist_ok=True)
        with self._errors(key):
            self._client.download_file(self.bucket, self._object_key(key), str(path))

    def exists(self, key: str) -> bool:
        """Whether an object is stored under `key`."""
        try:
            with self._errors(key):
                self._client.head_object(Bucket=self.bucket, Key=self._object_key(key))
        except NotFound:
            return False
        return True

    def delete(self, key: str) -> None:
        """Remove the object; S3 deletes of missing keys already succeed."""
        with self._errors(key):
            self._client.delete_object(Bucket=self.bucket, Key=self._object_key(key))

    def presign(self, key: str, expires_s: int = 300) -> str:
        """A presigned GET URL for `key`, valid for `expires_s` seconds."""
        params = {"Bucket": self.bucket, "Key": self._object_key(key)}
        url: str = self._client.generate_presigned_url("get_object", Params=params, ExpiresIn=expires_s)
        return url

    def _object_key(self, key: str) -> str:
        validate_key(key)
        return f"{self.prefix}/{key}" if self.prefix else key

    @contextmanager
    def _errors(self, key: str) -> Iterator[None]:
        from botocore.exceptions import ClientError, ConnectionError, HTTPClientError

        try:
            yield
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in _MISSING_CODES:
                raise NotFound(f"artifact {key!r} does not exist") from None
            raise
        # Connection trouble is retryable; the caller may try again later.
        except (ConnectionError, HTTPClientError) as exc:
            raise Unavailable(f"object storage at bucket {self.bucket!r} is unreachable: {exc}") from exc


def make_object_store(
    data_dir: Path,
    s3_bucket: str | None,
    s3_endpoint_url: str | None,
    s3_region: str | None,
    public_url: str,
    signing_key: str | None,
) -> ObjectStore:
    """S3 when a bucket is configured; otherwise the data directory's artifacts, signed for the gateway to serve."""
    if s3_bucket:
        return S3ObjectStore(s3_bucket, s3_endpoint_url, s3_region)
    return LocalObjectStore(data_dir / "artifacts", public_url, load_signing_key(data_dir, signing_key))
