"""Fixtures shared by every test: real PostgreSQL, Redis and an S3-compatible server.

PostgreSQL and Redis are the machine's own (127.0.0.1:5432 database `test`, 127.0.0.1:6379);
`.ci/run` starts them when they are down. The S3 server is moto's server mode, started once
per test session on a free port.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator

import psycopg
import pytest
import redis
from fakes.llm_server import FakeLLM

from support.processes import free_port, wait_for_http

POSTGRES_ADMIN_URL = os.environ.get("STASH_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_TEST_URL = os.environ.get("STASH_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")

# Set before any test module imports LiteLLM, and inherited by every process the tests start: LiteLLM reads
# its model price map from its package instead of fetching it from the web (the tests reach no internet).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def create_database() -> str:
    """A new, empty PostgreSQL database; returns its URL."""
    name = f"stash_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    return f"{POSTGRES_ADMIN_URL.rsplit('/', 1)[0]}/{name}"


def drop_database(url: str) -> None:
    """Drop a database made by `create_database`, closing whatever still connects to it."""
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test, dropped afterwards."""
    url = create_database()
    yield url
    drop_database(url)


@pytest.fixture(scope="module")
def module_postgres_url() -> Iterator[str]:
    """A fresh PostgreSQL database shared by the tests of one module (a running stack's)."""
    url = create_database()
    yield url
    drop_database(url)


@pytest.fixture
def redis_url() -> Iterator[str]:
    """The machine's Redis on a database reserved for tests, emptied before and after."""
    client = redis.Redis.from_url(REDIS_TEST_URL)
    client.flushdb()
    yield REDIS_TEST_URL
    client.flushdb()
    client.close()


@pytest.fixture(scope="module")
def module_redis_url() -> Iterator[str]:
    """The tests' Redis database for a whole module (a stack that lives across its tests)."""
    client = redis.Redis.from_url(REDIS_TEST_URL)
    client.flushdb()
    yield REDIS_TEST_URL
    client.flushdb()
    client.close()


@pytest.fixture(scope="session")
def s3_endpoint_url() -> Iterator[str]:
    """moto's S3-compatible server, running as a real HTTP server for the whole session."""
    port = free_port()
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(url)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def s3_bucket(s3_endpoint_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A new, empty bucket on the S3 server; AWS credentials point at the test server."""
    import boto3

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    name = f"stash-test-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=s3_endpoint_url, region_name="us-east-1").create_bucket(Bucket=name)
    return name


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    """A local server speaking the Anthropic and OpenAI wire formats, for the real clients."""
    server = FakeLLM().start()
    yield server
    server.stop()
