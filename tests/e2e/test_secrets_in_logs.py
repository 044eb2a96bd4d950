"""No credential in any log line: a whole embedded stack is driven with API keys (valid, read-only, wrong), OTLP
over HTTP and gRPC, a signed artifact download, admin calls and a provider key used for titles (against the
stand-in LLM server, once failing), then every service's log is searched for each secret."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import grpc
import httpx
import pytest
from fakes.llm_server import FakeLLM
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from stash_common.storage import ADMIN_KEY_FILE, LocalObjectStore, load_signing_key
from support.ingest import stash_line
from support.processes import stash_rm
from support.stack import RunningStack, running_stack

PROVIDER_KEY = f"sk-ant-test-{secrets.token_hex(16)}"
WRONG_KEY = f"srm_{secrets.token_urlsafe(32)}"


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    server = FakeLLM().start()
    server.reply = lambda _path, _body: "Refund for order 1182"
    yield server
    server.stop()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, llm: FakeLLM) -> Iterator[RunningStack]:
    with running_stack(
        tmp_path_factory.mktemp("secrets"), STASH_ANTHROPIC_API_KEY=PROVIDER_KEY, STASH_ANTHROPIC_BASE_URL=llm.url
    ) as running:
        yield running


def _drive(stack: RunningStack, llm: FakeLLM) -> list[str]:
    """Every kind of request that carries a secret; returns the secrets used."""
    key = stack.create_user("alice")
    read_only = stash_rm("keys", "create", "alice", "--read-only", env=stack.env).stdout.split("shown once): ")[1]
    read_only = read_only.split()[0]
    with stack.client(key) as client:
        assert client.post("/traces/import", json={"format": "stash", "data": stash_line("s-1")}).status_code == 200
        llm.fail_status = 401
        assert client.post("/traces/import", json={"format": "stash", "data": stash_line("s-2")}).status_code == 503
        llm.fail_status = None
        otlp = client.post("/otel/v1/traces", content=b"{}", headers={"Content-Type": "application/json"})
        assert otlp.status_code == 400
    with stack.client(read_only) as client:
        assert client.post("/traces/import", json={"format": "stash", "data": stash_line()}).status_code == 403
    with stack.client(WRONG_KEY) as client:
        assert client.get("/traces").status_code == 401
    _export_over_grpc(stack, key)
    signature = _signed_download(stack)
    admin_key = (stack.data_dir / ADMIN_KEY_FILE).read_text().strip()
    return [key, read_only, WRONG_KEY, PROVIDER_KEY, signature, admin_key]


def _export_over_grpc(stack: RunningStack, key: str) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{stack.env['STASH_GATEWAY_OTLP_GRPC_PORT']}") as channel:
        stub = trace_service_pb2_grpc.TraceServiceStub(channel)
        stub.Export(trace_service_pb2.ExportTraceServiceRequest(), metadata=[("authorization", f"Bearer {key}")])


def _signed_download(stack: RunningStack) -> str:
    """A signed URL of the gateway's artifact route, fetched; returns its signature."""
    store = LocalObjectStore(stack.data_dir / "artifacts", stack.gateway_url, load_signing_key(stack.data_dir, None))
    store.put("bench/weights.bin", b"weights")
    url = store.presign("bench/weights.bin")
    assert httpx.get(url).content == b"weights"
    return url.rsplit("signature=", 1)[1]


def test_no_log_line_of_a_full_run_holds_an_api_key_signed_url_or_provider_key(
    stack: RunningStack, llm: FakeLLM
) -> None:
    used = _drive(stack, llm)
    logs = sorted((stack.data_dir / "logs").glob("*.log"))
    text = {path.name: path.read_text(errors="replace") for path in logs}

    assert {"gateway.log", "ingest.log"} <= set(text)
    # The signed request itself is logged, without its query string.
    assert "GET /api/v1/rm/artifacts/bench/weights.bin?<redacted>" in text["gateway.log"]
    leaks = [(name, secret[:8]) for name, body in text.items() for secret in used if secret in body]
    assert leaks == []
