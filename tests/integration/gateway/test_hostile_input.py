"""Hostile input against the gateway app and a real ingest servicer on PostgreSQL: U+0000 anywhere, broken
gzip on OTLP, a service out of reach, the import and trace limits at their defaults, and per-key rate limits."""

from __future__ import annotations

import gzip
import secrets
from collections.abc import Iterator, MutableMapping
from typing import Any

import grpc
import orjson
import pytest
from fastapi.testclient import TestClient
from google.protobuf import json_format
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from stash_common.db import make_engine, make_sessions, transaction, upgrade
from stash_common.settings import load
from stash_gateway import store as gateway_store
from stash_gateway.app import create_app
from stash_gateway.settings import GatewaySettings
from stash_ingest.limits import DEFAULT_LIMITS
from stash_ingest.titles import derive_title
from support.ingest import serve_ingest
from support.otlp import chat_span, otlp_document, text_message
from support.processes import free_port, free_ports

API = "/api/v1/rm"
INGEST_PORT, *UNUSED_PORTS = free_ports(5)
# Ports nothing listens on: the labeler and scorer parts of a trace view are out of reach at once.
UNUSED = {
    name: f"127.0.0.1:{port}" for name, port in zip(("labeler", "trainer", "scorer", "gepa"), UNUSED_PORTS, strict=True)
}


@pytest.fixture(scope="module")
def ingest(module_postgres_url: str) -> Iterator[Any]:
    stub, stop = serve_ingest(module_postgres_url, derive_title, port=INGEST_PORT)
    yield stub
    stop()


def _gateway(database_url: str, data_dir: Any, ingest_address: str, **overrides: Any) -> TestClient:
    upgrade("gateway", gateway_store.MIGRATIONS_DIR, database_url)
    addresses = {f"{name}_address": address for name, address in UNUSED.items()}
    settings = load(
        GatewaySettings,
        database_url=database_url,
        data_dir=data_dir,
        ingest_address=ingest_address,
        otlp_grpc_port=0,
        **addresses,
        **overrides,
    )
    return TestClient(create_app(settings))


@pytest.fixture(scope="module")
def gateway(module_postgres_url: str, ingest: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    with _gateway(module_postgres_url, tmp_path_factory.mktemp("gw"), f"127.0.0.1:{INGEST_PORT}") as client:
        yield client


def _key(database_url: str, name: str) -> dict[str, str]:
    return _key_and_id(database_url, name)[0]


def _key_and_id(database_url: str, name: str) -> tuple[dict[str, str], str]:
    with transaction(make_sessions(make_engine(database_url))) as session:
        user = gateway_store.create_user(session, name)
        record, key = gateway_store.create_key(session, user.id, "full", read_only=False)
    return {"Authorization": f"Bearer {key}"}, record.id


@pytest.fixture
def auth(module_postgres_url: str) -> dict[str, str]:
    return _key(module_postgres_url, f"user-{secrets.token_hex(6)}")


def _import(client: TestClient, auth: dict[str, str], *traces: dict[str, Any], **body: Any) -> Any:
    data = "\n".join(orjson.dumps(trace).decode() for trace in traces)
    return client.post(f"{API}/traces/import", json={"format": "stash", "data": data, **body}, headers=auth)


def _tool_step(tool_input: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_name": "search", "tool_input": tool_input}


def _trace(*steps: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"steps": [{"role": "user", "content": "hello"}, *steps], **fields}


def _nested(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


@pytest.mark.parametrize(
    ("trace", "body", "field"),
    [
        (_trace(_tool_step({"query": ["ok", "bad\u0000"]})), {}, "line 1: steps[1].tool_input.query[1]"),
        (_trace(_tool_step({"k\u0000": 1})), {}, "line 1: steps[1].tool_input (key 'k\\x00')"),
        (_trace(metadata={"source_id": "agent\u0000"}), {}, "line 1: metadata.source_id"),
        (_trace(), {"source_id": "src\u0000"}, "source_id"),
        (_trace(_tool_step(_nested(21))), {}, "line 1: steps[1].tool_input" + ".a" * 20),
    ],
)
def test_nul_and_deep_nesting_are_refused_with_422_naming_the_field(
    gateway: TestClient, auth: dict[str, str], trace: dict[str, Any], body: dict[str, Any], field: str
) -> None:
    response = _import(gateway, auth, trace, **body)

    assert response.status_code == 422, response.text
    assert response.json()["field"] == field
    assert gateway.get(f"{API}/traces", headers=auth).json()["total"] == 0


def test_a_trace_at_the_default_step_limit_is_stored_and_reads_back_whole(
    gateway: TestClient, auth: dict[str, str]
) -> None:
    steps = [
        {"role": "user" if n % 2 else "assistant", "content": f"step {n}"}
        for n in range(1, DEFAULT_LIMITS.steps_per_trace)
    ]
    imported = _import(gateway, auth, _trace(*steps))
    assert imported.status_code == 200, imported.text

    url = f"{API}/traces/{imported.json()['trace_ids'][0]}"
    read = gateway.get(url, headers=auth)
    page = gateway.get(url, params={"steps_offset": 9990, "steps_limit": 20}, headers=auth)

    assert read.status_code == 200
    assert len(read.json()["steps"]) == DEFAULT_LIMITS.steps_per_trace
    assert [step["index"] for step in page.json()["steps"]] == list(range(9990, 10_000))
    assert page.json()["steps"][0]["content"] == "step 9990"
    assert page.json()["step_count"] == DEFAULT_LIMITS.steps_per_trace


def test_one_step_over_the_default_limit_is_422_naming_the_line(gateway: TestClient, auth: dict[str, str]) -> None:
    steps = [{"role": "user", "content": "x"}] * DEFAULT_LIMITS.steps_per_trace

    response = _import(gateway, auth, _trace(*steps))

    assert response.status_code == 422
    assert response.json()["field"] == "line 1: steps"
    assert "steps exceed the limit of 10000 per trace" in response.json()["detail"]


def test_oversized_content_and_tool_input_are_422_naming_the_field(gateway: TestClient, auth: dict[str, str]) -> None:
    long_text = _import(
        gateway, auth, _trace({"role": "assistant", "content": "x" * (DEFAULT_LIMITS.string_chars + 1)})
    )
    big_input = _import(gateway, auth, _trace(_tool_step({"q": "x" * DEFAULT_LIMITS.tool_input_bytes})))

    assert (long_text.status_code, long_text.json()["field"]) == (422, "line 1: steps[1].content")
    assert (big_input.status_code, big_input.json()["field"]) == (422, "line 1: steps[1].tool_input")


def test_too_many_traces_in_one_import_is_413(gateway: TestClient, auth: dict[str, str]) -> None:
    traces = [_trace(id=f"t{n}") for n in range(DEFAULT_LIMITS.traces_per_import + 1)]

    response = _import(gateway, auth, *traces)

    assert response.status_code == 413
    assert "one import may hold at most 10000 traces" in response.json()["detail"]


def test_a_key_whose_imports_are_all_running_gets_429_before_its_body_is_read(
    gateway: TestClient, module_postgres_url: str
) -> None:
    auth, key_id = _key_and_id(module_postgres_url, f"busy-{secrets.token_hex(6)}")
    other = _key(module_postgres_url, f"idle-{secrets.token_hex(6)}")
    slots = gateway.app.state.import_slots  # type: ignore[attr-defined]
    running = [slots.take(key_id, 2, 600.0) for _ in range(2)]  # two imports of this key in flight
    oversized = {**auth, "Content-Type": "application/json", "Content-Length": str(10**10)}

    refused = _import(gateway, auth, _trace(id="third"))
    unread = gateway.post(f"{API}/traces/import", content=b"{}", headers=oversized)
    transcript = gateway.post("/api/v1/me/transcripts", content=b"{}", headers=auth)
    another_key = _import(gateway, other, _trace(id="other"))
    slots.give_back(key_id, running.pop())
    after_one_ends = _import(gateway, auth, _trace(id="third"))

    assert refused.status_code == 429 and refused.headers["Retry-After"] == "1"
    assert refused.json()["detail"] == (
        "2 imports of this API key are already running; a key may run 2 at once: retry after one ends"
    )
    assert unread.status_code == 429  # not 413: the body was never read
    assert transcript.status_code == 429
    assert another_key.status_code == 200
    assert after_one_ends.status_code == 200, after_one_ends.text


def _otlp_body() -> bytes:
    span = chat_span("00f067aa0ba902b7", 1, [text_message("user", "hi")], [text_message("assistant", "hello")])
    return orjson.dumps(otlp_document(span))


@pytest.mark.parametrize("media", ["application/x-protobuf", "application/json"])
@pytest.mark.parametrize(
    ("body", "expected", "message"),
    [
        pytest.param(b"this is not gzip at all", 400, "body: is not valid gzip", id="not-gzip"),
        pytest.param(gzip.compress(b"{}")[:-6], 400, "body: gzip stream is truncated", id="truncated"),
        pytest.param(gzip.compress(b"\0" * (51 * 1024 * 1024)), 413, "decompressed body exceeds", id="bomb"),
    ],
)
def test_otlp_bad_gzip_gets_a_google_rpc_status_in_the_request_content_type(
    gateway: TestClient, auth: dict[str, str], media: str, body: bytes, expected: int, message: str
) -> None:
    headers = {**auth, "Content-Type": media, "Content-Encoding": "gzip"}

    response = gateway.post(f"{API}/otel/v1/traces", content=body, headers=headers)

    assert response.status_code == expected
    assert response.headers["content-type"].startswith(media)
    status = _status(response.content, media)
    assert status.code == (code_pb2.INVALID_ARGUMENT if expected == 400 else code_pb2.RESOURCE_EXHAUSTED)
    assert message in status.message


def _status(content: bytes, media: str) -> status_pb2.Status:
    if media == "application/x-protobuf":
        return status_pb2.Status.FromString(content)
    parsed = orjson.loads(content)
    return status_pb2.Status(code=parsed["code"], message=parsed["message"])


def test_otlp_source_header_with_nul_is_a_400_status(gateway: TestClient, auth: dict[str, str]) -> None:
    headers = {**auth, "Content-Type": "application/json", "X-Stash-Trace-Source": "a%00b".replace("%00", "\x00")}

    response = gateway.post(f"{API}/otel/v1/traces", content=_otlp_body(), headers=headers)

    assert response.status_code == 400
    assert "source_id: contains U+0000" in orjson.loads(response.content)["message"]


def test_a_service_out_of_reach_is_503_naming_it_without_addresses(
    module_postgres_url: str, auth: dict[str, str], tmp_path: Any
) -> None:
    down = f"127.0.0.1:{free_port()}"
    with _gateway(module_postgres_url, tmp_path, down) as client:
        response = client.get(f"{API}/traces", headers=auth)
        with pytest.raises(grpc.RpcError) as over_grpc:
            _grpc_export(client, auth)

    assert response.status_code == 503
    assert response.json() == {"detail": "the ingest service is unavailable; retry shortly"}
    assert response.headers["Retry-After"] == "1"
    assert over_grpc.value.code() == grpc.StatusCode.UNAVAILABLE
    assert over_grpc.value.details() == "the ingest service is unavailable; retry shortly"


def _grpc_export(client: TestClient, auth: dict[str, str]) -> Any:
    """One OTLP/gRPC export to the app's TraceService, with the REST key as `authorization` metadata."""
    request = trace_service_pb2.ExportTraceServiceRequest()
    json_format.Parse(_otlp_body(), request)
    with grpc.insecure_channel(f"127.0.0.1:{client.app.state.otlp_grpc_port}") as channel:  # type: ignore[attr-defined]
        stub = trace_service_pb2_grpc.TraceServiceStub(channel)
        return stub.Export(request, metadata=[("authorization", auth["Authorization"])], timeout=30)


def test_imports_otlp_and_queries_past_a_keys_rate_limit_get_429_with_retry_after(
    module_postgres_url: str, ingest: Any, tmp_path: Any
) -> None:
    limits = {"rate_limit_imports_per_minute": 2, "rate_limit_otlp_per_minute": 1, "rate_limit_query_per_minute": 1}
    auth = _key(module_postgres_url, f"limited-{secrets.token_hex(6)}")
    other = _key(module_postgres_url, f"unlimited-{secrets.token_hex(6)}")
    otlp = {"content": _otlp_body(), "headers": {**auth, "Content-Type": "application/json"}}
    with _gateway(module_postgres_url, tmp_path, f"127.0.0.1:{INGEST_PORT}", **limits) as client:
        imports = [_import(client, auth, _trace(id=f"r{n}")).status_code for n in range(3)]
        exports = [client.post(f"{API}/otel/v1/traces", **otlp) for _ in range(2)]  # type: ignore[arg-type]
        queries = [client.post(f"{API}/query", json={"sql": "SELECT 1"}, headers=auth) for _ in range(2)]
        another_key = _import(client, other, _trace(id="other")).status_code
        with pytest.raises(grpc.RpcError) as over_grpc:
            _grpc_export(client, auth)

    assert imports == [200, 200, 429]
    assert [export.status_code for export in exports] == [200, 429]
    refused = json_format.Parse(exports[1].text, status_pb2.Status())  # OTLP/HTTP's error body, as JSON was sent
    export_retry = error_details_pb2.RetryInfo()
    assert refused.code == code_pb2.RESOURCE_EXHAUSTED and "rate limit of 1 otlp requests" in refused.message
    assert refused.details[0].Unpack(export_retry)
    assert export_retry.retry_delay.seconds == int(exports[1].headers["Retry-After"]) > 0
    assert queries[0].status_code != 429 and queries[1].status_code == 429
    assert 0 < int(queries[1].headers["Retry-After"]) <= 60  # one request a minute: at most a minute away
    assert "rate limit of 1 query requests per minute" in queries[1].json()["detail"]
    assert another_key == 200
    assert over_grpc.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    retry = error_details_pb2.RetryInfo()
    assert rpc_status.from_call(over_grpc.value).details[0].Unpack(retry)  # type: ignore[arg-type]
    assert 0 < retry.retry_delay.seconds <= 60


@pytest.mark.parametrize("tz", ["a" * 300, "Europe/Nowhere", "../../etc/passwd"])
def test_an_unknown_time_zone_is_422_whatever_its_name(gateway: TestClient, auth: dict[str, str], tz: str) -> None:
    response = gateway.get(f"{API}/traces", params={"tz": tz, "imported_from": "2026-01-01"}, headers=auth)

    assert (response.status_code, response.json()["field"]) == (422, "tz")


def test_nul_in_a_url_parameter_or_body_field_is_422_naming_it(gateway: TestClient, auth: dict[str, str]) -> None:
    in_query = gateway.get(f"{API}/traces", params={"source_id": "a\x00"}, headers=auth)
    in_path = gateway.get(f"{API}/traces/a%00b", headers=auth)
    in_body = gateway.post(f"{API}/keys", json={"name": "k\x00"}, headers=auth)

    assert (in_query.status_code, in_query.json()["field"]) == (422, "source_id")
    assert (in_path.status_code, in_path.json()["field"]) == (422, "path")
    assert (in_body.status_code, in_body.json()["field"]) == (422, "name")


def test_an_out_of_range_page_or_rating_is_422_not_a_server_error(gateway: TestClient, auth: dict[str, str]) -> None:
    page = gateway.get(f"{API}/traces", params={"offset": 2**40}, headers=auth)
    rating = gateway.post(f"{API}/traces/t/annotations", json={"rating": 2**40}, headers=auth)

    assert (page.status_code, page.json()["field"]) == (422, "offset")
    assert (rating.status_code, rating.json()["field"]) == (422, "rating")


# --- the REST byte limit: refused with 413 as soon as the body passes it, the rest never read ---------------------

BODY_LIMIT = 4096
CHUNK = b"x" * 1024
BODY_ROUTES = [f"{API}/traces/import", "/api/v1/me/transcripts"]


@pytest.fixture(scope="module")
def small_gateway(
    module_postgres_url: str, ingest: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TestClient]:
    gateway_dir = tmp_path_factory.mktemp("small")
    with _gateway(module_postgres_url, gateway_dir, f"127.0.0.1:{INGEST_PORT}", max_body_bytes=BODY_LIMIT) as client:
        yield client


def _post_in_chunks(client: TestClient, path: str, auth: dict[str, str], chunks: int) -> tuple[int, Any, int]:
    """POST `chunks` pieces of CHUNK with no Content-Length, straight to the ASGI app on the client's event loop
    (the test client would read a body whole before the app sees it): the status, the JSON body, and how many
    pieces the app read."""
    pulled = 0
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal pulled
        if pulled == chunks:
            return {"type": "http.disconnect"}
        pulled += 1
        return {"type": "http.request", "body": CHUNK, "more_body": pulled < chunks}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    headers = [(name.lower().encode(), value.encode()) for name, value in auth.items()]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [*headers, (b"content-type", b"application/json")],
        "server": ("testserver", 80),
        "client": ("127.0.0.1", 50000),
    }

    async def request() -> None:
        await client.app(scope, receive, send)

    assert client.portal is not None  # inside the client's `with`
    client.portal.call(request)
    status = next(message["status"] for message in sent if message["type"] == "http.response.start")
    body = b"".join(message.get("body", b"") for message in sent if message["type"] == "http.response.body")
    return status, orjson.loads(body), pulled


@pytest.mark.parametrize("path", BODY_ROUTES)
def test_a_body_declared_over_the_byte_limit_is_413_naming_the_limit(
    small_gateway: TestClient, auth: dict[str, str], path: str
) -> None:
    response = small_gateway.post(path, content=b"x" * (BODY_LIMIT + 1), headers=auth)

    assert response.status_code == 413
    assert response.json()["detail"] == f"request body of {BODY_LIMIT + 1} bytes exceeds the {BODY_LIMIT}-byte limit"


@pytest.mark.parametrize("path", BODY_ROUTES)
def test_a_streamed_body_over_the_byte_limit_is_413_and_read_no_further(
    small_gateway: TestClient, auth: dict[str, str], path: str
) -> None:
    status, body, pulled = _post_in_chunks(small_gateway, path, auth, chunks=1000)  # 1 MiB, 250 times the limit

    assert status == 413
    assert body["detail"] == f"request body exceeds the {BODY_LIMIT}-byte limit"
    assert pulled == BODY_LIMIT // len(CHUNK) + 1  # the piece that crossed the limit, and not one more


@pytest.mark.parametrize("path", BODY_ROUTES)
def test_a_body_at_the_byte_limit_is_read(small_gateway: TestClient, auth: dict[str, str], path: str) -> None:
    status, body, pulled = _post_in_chunks(small_gateway, path, auth, chunks=BODY_LIMIT // len(CHUNK))

    assert pulled == BODY_LIMIT // len(CHUNK), body
    # Read whole, then refused for what it says (x is not JSON), not for its size.
    assert status in (400, 422), (status, body)
