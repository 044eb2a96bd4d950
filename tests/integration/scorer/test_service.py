"""The scorer as a process: it reports SERVING once its tables are migrated and its dispatcher runs, in
either profile, and refuses to start in the cluster profile without its database."""

import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

import grpc
import pytest
from sqlalchemy import inspect

from stash_common.channels import check_health, open_channel
from stash_common.db import make_engine
from stash_common.server import start
from stash_scorer.store import Base
from support.processes import stack_env, start_service, wait_for_health


@pytest.fixture
def stopped() -> Iterator[list[subprocess.Popen[str]]]:
    processes: list[subprocess.Popen[str]] = []
    yield processes
    for process in processes:
        process.terminate()
        process.wait(timeout=30)


def test_the_embedded_scorer_serves_once_its_tables_exist(tmp_path: Path, stopped: list) -> None:
    env = stack_env(tmp_path)
    stopped.append(start_service("scorer", env))

    wait_for_health(env["STASH_SCORER_ADDRESS"])

    engine = make_engine(f"sqlite:///{tmp_path / 'scorer.db'}")
    assert set(Base.metadata.tables) <= set(inspect(engine).get_table_names())
    engine.dispose()


def test_the_cluster_scorer_serves_on_postgresql_and_redis(
    tmp_path: Path, empty_postgres_url: str, redis_url: str, stopped: list
) -> None:
    env = stack_env(
        tmp_path,
        STASH_PROFILE="cluster",
        STASH_SCORER_DATABASE_URL=empty_postgres_url,
        STASH_SCORER_REDIS_URL=redis_url,
    )
    stopped.append(start_service("scorer", env))

    wait_for_health(env["STASH_SCORER_ADDRESS"])

    engine = make_engine(empty_postgres_url)
    assert set(Base.metadata.tables) <= set(inspect(engine).get_table_names())
    engine.dispose()


def test_the_cluster_scorer_names_the_database_it_needs(tmp_path: Path) -> None:
    process = start_service("scorer", stack_env(tmp_path, STASH_PROFILE="cluster"))
    output, _ = process.communicate(timeout=60)

    assert process.returncode == 1
    assert "error: STASH_SCORER_DATABASE_URL is not set (PostgreSQL URL for the scorer's" in output


def _register(server: grpc.Server) -> Sequence[str]:
    return ["stash.test.Probe"]


def test_a_server_started_unready_reports_not_serving_until_it_is_ready() -> None:
    running = start(_register, "127.0.0.1", 0, serving=False)
    channel = open_channel(f"127.0.0.1:{running.port}")
    try:
        assert (check_health(channel), check_health(channel, "stash.test.Probe")) == ("NOT_SERVING", "NOT_SERVING")
        running.set_serving(True)
        assert (check_health(channel), check_health(channel, "stash.test.Probe")) == ("SERVING", "SERVING")
    finally:
        channel.close()
        running.stop(0)
