"""A store that blinks, on the cluster profile: PostgreSQL and Redis of our own, really stopped and started again.

While the database is down every answer is retryable and says nothing about the store (503 with Retry-After
and a JSON body over REST and OTLP/HTTP, UNAVAILABLE over gRPC and OTLP/gRPC), readiness reports it while
liveness stays up, and once it is back the same processes serve again. While Redis is down nothing fails:
it carries only hints and rate limits.
"""

import time
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from stash.rm.v1 import ingest_pb2, ingest_pb2_grpc
from stash_common.channels import READINESS_NAMES, check_health, open_channel
from support.ingest import stash_line
from support.logs import complaints
from support.stack import RunningStack, cluster_env, running_stack
from support.stores import PrivatePostgres, PrivateRedis, private_postgres, private_redis

RECOVERY_S = 60.0
# What an answer must never carry: where the store is, the SQL, the driver's words.
LEAKS = ("127.0.0.1", "5432", "SELECT", "psycopg", "OperationalError", "Traceback", "sqlalchemy", "redis://")


@pytest.fixture(scope="module")
def postgres() -> Iterator[PrivatePostgres]:
    with private_postgres() as server:
        yield server


@pytest.fixture(scope="module")
def redis_server() -> Iterator[PrivateRedis]:
    with private_redis() as server:
        yield server


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, postgres: PrivatePostgres, redis_server: PrivateRedis
) -> Iterator[RunningStack]:
    with running_stack(tmp_path_factory.mktemp("outages"), **cluster_env(postgres.url, redis_server.url)) as running:
        yield running


def _clean(text: str, port: int) -> bool:
    return not any(leak in text for leak in (*LEAKS, str(port)))


def _until(condition: Any, timeout_s: float = RECOVERY_S) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (result := condition()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return result


def test_a_stopped_database_gets_retryable_clean_answers_and_the_stack_recovers_without_restarts(
    stack: RunningStack, key: str, api: httpx.Client, postgres: PrivatePostgres
) -> None:
    trace = api.post("/traces/import", json={"format": "stash", "data": stash_line("before")}).json()["trace_ids"][0]
    pids = {name: stack.pid(name) for name in ("gateway", "ingest", "labeler")}
    ingest = open_channel(stack.env["STASH_INGEST_ADDRESS"])
    otlp = open_channel(f"127.0.0.1:{stack.env['STASH_GATEWAY_OTLP_GRPC_PORT']}")
    postgres.stop()
    try:
        rest = api.get(f"/traces/{trace}")
        otlp_http = api.post("/otel/v1/traces", content=b"", headers={"Content-Type": "application/x-protobuf"})
        ready, live = httpx.get(f"{stack.gateway_url}/readyz"), httpx.get(f"{stack.gateway_url}/livez")
        with pytest.raises(grpc.RpcError) as listed:
            ingest_pb2_grpc.IngestServiceStub(ingest).GetTrace(
                ingest_pb2.GetTraceRequest(owner_id="someone", trace_id=trace), timeout=30
            )
        with pytest.raises(grpc.RpcError) as exported:
            trace_service_pb2_grpc.TraceServiceStub(otlp).Export(
                trace_service_pb2.ExportTraceServiceRequest(), metadata=[("authorization", f"Bearer {key}")], timeout=30
            )
        not_ready = _until(lambda: check_health(ingest, READINESS_NAMES["ingest"]) == "NOT_SERVING")
        alive = check_health(ingest)
    finally:
        postgres.start()

    for answer in (rest, otlp_http):
        assert answer.status_code == 503, answer.text
        assert answer.headers["Retry-After"] == "1" and answer.headers["Content-Type"] == "application/json"
        assert answer.json() == {"detail": "the database is unavailable; retry shortly"}
    assert ready.status_code == 503 and "the gateway's database is UNREACHABLE" in ready.json()["detail"]
    assert live.status_code == 200
    assert (listed.value.code(), listed.value.details()) == (
        grpc.StatusCode.UNAVAILABLE,
        "the database is unavailable; retry shortly",
    )
    assert exported.value.code() == grpc.StatusCode.UNAVAILABLE and _clean(exported.value.details(), postgres.port)
    assert not_ready and alive == "SERVING"
    assert _until(lambda: api.get(f"/traces/{trace}").status_code == 200)
    assert _until(lambda: httpx.get(f"{stack.gateway_url}/readyz").status_code == 200)
    assert {name: stack.pid(name) for name in pids} == pids
    assert all(_clean(text, postgres.port) for text in (rest.text, otlp_http.text, ready.text))


def test_a_stopped_redis_slows_nothing_down_and_is_logged_once(
    stack: RunningStack, api: httpx.Client, redis_server: PrivateRedis
) -> None:
    redis_server.stop()
    try:
        imported = api.post("/traces/import", json={"format": "stash", "data": stash_line("no-redis")})
        time.sleep(5.0)  # a few of every loop's one-second polls
        ready = httpx.get(f"{stack.gateway_url}/readyz")
        trace = imported.json()["trace_ids"][0]
        labelled = _until(lambda: (api.get(f"/traces/{trace}").json()["evaluation"] or {}).get("status"))
    finally:
        redis_server.start()

    assert imported.status_code == 200, imported.text
    assert labelled == "succeeded"  # found by the labeler's polling, without a wake-up
    assert ready.status_code == 200 and ready.json()["stores"]["redis"] == "UNREACHABLE"
    logged = complaints(stack.data_dir)
    lost = [line for line in logged if "wake-ups unavailable" in line]
    assert lost and len(lost) == len(set(lost))  # once per loop (the trainer has two), not once a second
    unreachable = [line.split(":")[0] for line in logged if "Redis is unreachable" in line]
    assert unreachable and len(unreachable) == len(set(unreachable))  # once per service, naming where
