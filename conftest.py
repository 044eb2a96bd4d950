"""Fixtures shared by every test: real PostgreSQL, Redis and an S3-compatible server; each test's tier marker.

PostgreSQL and Redis are the machine's own (127.0.0.1:5432 database `test`, 127.0.0.1:6379);
`.ci/run` starts them when they are down. The S3 server is moto's server mode, started once
per test session on a free port.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator

import psycopg
import pytest
import redis
from fakes.llm_server import FakeLLM

from support.models import new_bucket, offline_training_env
from support.processes import free_port, wait_for_http
from support.stack import RunningStack, cluster_env, running_stack

POSTGRES_ADMIN_URL = os.environ.get("STASH_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
# pytest-xdist runs the suite in worker processes gw0, gw1, …; each takes Redis databases of its own (two per worker,
# counting down from 15), as it takes free ports and database names of its own. Without xdist this is worker 0.
_XDIST_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))
REDIS_TEST_URL = os.environ.get("STASH_TEST_REDIS_URL", f"redis://127.0.0.1:6379/{15 - 2 * _XDIST_WORKER}")
# The session's cluster stack keeps its own Redis database: `redis_url` and `module_redis_url` empty REDIS_TEST_URL's.
CLUSTER_STACK_REDIS_URL = os.environ.get(
    "STASH_TEST_CLUSTER_REDIS_URL", f"redis://127.0.0.1:6379/{14 - 2 * _XDIST_WORKER}"
)

# Each test's tier, from the first of these folders (relative to the repository) that holds it; every other test is a
# `unit` test. A test that declares a tier marker itself keeps it. The markers are registered in pyproject.toml.
TIERS_BY_FOLDER = {
    "tests/integration/": ("integration",),
    # The job workers train and score with real torch on the packaged model.
    "services/trainer/tests/worker/": ("integration",),
    "services/scorer/tests/worker/": ("integration",),
    "services/gepa/tests/worker/": ("integration",),
    "tests/e2e/": ("e2e",),
    "tests/ui/": ("ui",),
    "tests/chart/": ("chart", "static"),
    "tests/test_lint.py": ("static",),
    "tests/test_types.py": ("static",),
    "tests/test_import_contracts.py": ("static",),
    "tests/test_protos.py": ("static",),
}
TIERS = ("unit", "integration", "e2e", "ui", "chart", "static")
# The order the tiers run in: the slowest files first, so the many short unit files fill both workers at the end
# (the suite is CPU-bound on two cores; a long file started last kept one core idle while it ran).
RUN_ORDER = ("e2e", "ui", "integration", "unit", "chart", "static")

# Set before any test module imports LiteLLM, and inherited by every process the tests start: LiteLLM reads
# its model price map from its package instead of fetching it from the web (the tests reach no internet).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def tiers_of(relative_path: str) -> tuple[str, ...]:
    """The tier markers of a test in the file at `relative_path` (POSIX, from the repository root)."""
    for folder, tiers in TIERS_BY_FOLDER.items():
        if relative_path.startswith(folder):
            return tiers
    return ("unit",)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test with its tier, before `-m` selects by markers, and order the tiers as RUN_ORDER says
    (stable: a file's tests stay together and in their order, which xdist's whole-file scheduling keeps)."""
    for item in items:
        if any(item.get_closest_marker(tier) for tier in TIERS):
            continue
        for tier in tiers_of(item.path.relative_to(config.rootpath).as_posix()):
            item.add_marker(tier)
    items.sort(key=_run_rank)


def _run_rank(item: pytest.Item) -> int:
    return min(RUN_ORDER.index(marker.name) for marker in item.iter_markers() if marker.name in RUN_ORDER)


def create_database(template: str | None = None) -> str:
    """A new PostgreSQL database, empty or a copy of the database `template`; returns its URL."""
    name = f"stash_test_{uuid.uuid4().hex[:12]}"
    copying = f' TEMPLATE "{template}"' if template else ""
    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"{copying}')
    return f"{POSTGRES_ADMIN_URL.rsplit('/', 1)[0]}/{name}"


def drop_database(url: str) -> None:
    """Drop a database made by `create_database`, closing whatever still connects to it."""
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def migrate_every_service(url: str) -> None:
    """Every service's tables at head in the database at `url`, and no connection left open to it (a database
    is copied only while nobody is connected: the migrations' pooled connections are closed)."""
    from stash_common.db import upgrade

    for service in ("gateway", "ingest", "labeler", "trainer", "scorer", "gepa"):
        upgrade(service, importlib.import_module(f"stash_{service}.store").MIGRATIONS_DIR, url)
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))


@pytest.fixture(scope="session")
def migrated_template() -> Iterator[str]:
    """The name of a database migrated once per session, with every service's tables at head and no rows:
    `postgres_url` and `module_postgres_url` are copies of it (CREATE DATABASE … TEMPLATE), not migrated again."""
    url = create_database()
    try:
        migrate_every_service(url)
        yield url.rsplit("/", 1)[1]
    finally:
        drop_database(url)


@pytest.fixture
def postgres_url(migrated_template: str) -> Iterator[str]:
    """A fresh PostgreSQL database for one test, every service's tables at head and no rows; dropped afterwards.
    A test of the migrations, or of a service creating its own tables, takes `empty_postgres_url`."""
    url = create_database(migrated_template)
    yield url
    drop_database(url)


@pytest.fixture
def empty_postgres_url() -> Iterator[str]:
    """A fresh PostgreSQL database without any table, dropped afterwards: for tests of the migrations, and of a
    service or stack that must create its tables itself (as on a new installation)."""
    url = create_database()
    yield url
    drop_database(url)


@pytest.fixture(scope="module")
def module_postgres_url(migrated_template: str) -> Iterator[str]:
    """A fresh PostgreSQL database shared by the tests of one module (a running stack's), tables at head."""
    url = create_database(migrated_template)
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


@pytest.fixture(scope="session")
def embedded_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    """One `stash-rm up` on the embedded profile with default settings for the whole session, shared by the
    test modules that neither stop its services nor change its settings; each module names its own users
    (`RunningStack.for_module`) and sees only their data."""
    with running_stack(tmp_path_factory.mktemp("embedded")) as running:
        yield running


@pytest.fixture(scope="session")
def cluster_llm() -> Iterator[FakeLLM]:
    """The fake LLM server `cluster_stack`'s GEPA reflects with; a module that runs GEPA on that stack sets what it
    answers for the module's duration (and may give its URL as the runs' task model too)."""
    server = FakeLLM().start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def cluster_stack(
    tmp_path_factory: pytest.TempPathFactory, migrated_template: str, s3_endpoint_url: str, cluster_llm: FakeLLM
) -> Iterator[RunningStack]:
    """One `stash-rm up` on the cluster profile for the whole session (its own database, Redis database and S3
    bucket), training on the packaged model, shared like `embedded_stack` by the modules that need PostgreSQL,
    Redis and S3 but neither stop its services nor need other settings; each module names its own users
    (`RunningStack.for_module`). Changed traces wait an hour to be scored in the background, so a module that
    scores asks for it, and a scoring run is the one its request made; request bodies are limited to 300 kB; GEPA
    reflects with `cluster_llm`."""
    postgres_url = create_database(migrated_template)
    redis_client = redis.Redis.from_url(CLUSTER_STACK_REDIS_URL)
    redis_client.flushdb()
    try:
        with running_stack(
            tmp_path_factory.mktemp("cluster"),
            **cluster_env(postgres_url, CLUSTER_STACK_REDIS_URL),
            **offline_training_env(new_bucket(s3_endpoint_url, "stash-cluster"), s3_endpoint_url),
            STASH_SCORER_MAX_LENGTH="128",
            STASH_SCORER_DEBOUNCE_S="3600",
            STASH_GEPA_REFLECTION_API_BASE=f"{cluster_llm.url}/v1",
            STASH_GEPA_MAX_LENGTH="128",
            # Small enough for a test to send a body over it.
            STASH_GATEWAY_MAX_BODY_BYTES="300000",
        ) as running:
            yield running
    finally:
        redis_client.flushdb()
        redis_client.close()
        drop_database(postgres_url)
