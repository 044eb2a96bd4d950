"""POST /api/v1/me/transcripts on the gateway app, against a real ingest servicer on PostgreSQL.

Every real Claude Code and Codex fixture goes through it; one fixture grows line by line and keeps its
step ids and annotations; older and duplicate snapshots change nothing; a divergent one is refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient

from stash.rm.v1 import ingest_pb2
from stash_common.db import make_engine, make_sessions, transaction, upgrade
from stash_common.settings import load
from stash_gateway import store as gateway_store
from stash_gateway.app import create_app
from stash_gateway.settings import GatewaySettings
from stash_ingest.titles import derive_title
from support.fixtures import REAL_FIXTURES, real_fixture
from support.ingest import serve_ingest
from support.processes import free_port

NATIVE_FIXTURES = sorted(
    [*(f"claude-code/{p.name}" for p in (REAL_FIXTURES / "claude-code").glob("*.jsonl"))]
    + [f"codex/{p.name}" for p in (REAL_FIXTURES / "codex").glob("*.jsonl")]
)
GROWING = "codex/codemie-codex-desktop-0.128-rollout.jsonl"
PATH = "/api/v1/me/transcripts"


INGEST_PORT = free_port()


@pytest.fixture(scope="module")
def ingest(module_postgres_url: str) -> Iterator[Any]:
    stub, stop = serve_ingest(module_postgres_url, derive_title, port=INGEST_PORT)
    yield stub
    stop()


@pytest.fixture(scope="module")
def gateway(module_postgres_url: str, ingest: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    upgrade("gateway", gateway_store.MIGRATIONS_DIR, module_postgres_url)
    settings = load(
        GatewaySettings,
        database_url=module_postgres_url,
        data_dir=tmp_path_factory.mktemp("gateway"),
        ingest_address=f"127.0.0.1:{INGEST_PORT}",
        otlp_grpc_port=0,
    )
    with TestClient(create_app(settings)) as client:
        yield client


class User:
    """A caller of the gateway app with a full-access key."""

    def __init__(self, gateway: TestClient, database_url: str, name: str, enabled: bool = True) -> None:
        sessions = make_sessions(make_engine(database_url))
        with transaction(sessions) as session:
            user = gateway_store.create_user(session, name)
            _, key = gateway_store.create_key(session, user.id, "full", read_only=False)
            if not enabled:
                gateway_store.set_reward_models_enabled(session, user.id, False)
        self.id, self.gateway = user.id, gateway
        self.headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/x-ndjson"}

    def upload(self, data: bytes, expected: int = 200, **params: str) -> Any:
        response = self.gateway.post(PATH, content=data, params=params, headers=self.headers)
        assert response.status_code == expected, response.text
        return response.json()


@pytest.fixture
def user(gateway: TestClient, module_postgres_url: str, request: pytest.FixtureRequest) -> User:
    return User(gateway, module_postgres_url, f"user-{request.node.name}")


def _trace(ingest: Any, owner_id: str, trace_id: str) -> Any:
    return ingest.GetTrace(ingest_pb2.GetTraceRequest(owner_id=owner_id, trace_id=trace_id), timeout=30)


def _lines(raw: bytes) -> list[bytes]:
    return raw.splitlines(keepends=True)


@pytest.mark.parametrize("fixture", NATIVE_FIXTURES)
def test_every_real_fixture_becomes_one_trace(user: User, ingest: Any, fixture: str) -> None:
    agent = fixture.split("/")[0].replace("-", "_")

    detected = user.upload(real_fixture(fixture))
    again = user.upload(real_fixture(fixture), agent=agent)

    assert detected["agent"] == agent
    assert detected["result"] == "created"
    assert again == {**detected, "result": "unchanged"}
    assert len(_trace(ingest, user.id, detected["trace_id"]).trace.steps) > 0


def test_snapshots_cut_at_every_line_append_with_stable_ids_and_kept_annotations(user: User, ingest: Any) -> None:
    lines = _lines(real_fixture(GROWING))
    first, trace_id = _first_cut_with_a_step(user, lines)
    seen: list[str] = []
    annotated: list[str] = []
    for count in range(first, len(lines) + 1):
        answer = user.upload(b"".join(lines[:count]), agent="codex")
        steps = list(_trace(ingest, user.id, answer["trace_id"]).trace.steps)
        assert answer["trace_id"] == trace_id
        assert [step.id for step in steps[: len(seen)]] == seen
        assert answer["result"] == ("appended" if len(steps) > len(seen) and seen else "unchanged")
        if len(steps) > len(seen):  # annotate the newest step of every snapshot that grew
            message = ingest_pb2.CreateAnnotationRequest(
                owner_id=user.id, trace_id=answer["trace_id"], step_id=steps[-1].id, comment=f"line {count}"
            )
            ingest.CreateAnnotation(message, timeout=30)
            annotated.append(steps[-1].id)
        seen = [step.id for step in steps]

    annotations = _trace(ingest, user.id, trace_id).annotations
    assert sorted(annotation.step_id for annotation in annotations) == sorted(annotated)
    assert len(seen) > 1


def _first_cut_with_a_step(user: User, lines: list[bytes]) -> tuple[int, str]:
    """(line count, trace id) of the first cut that holds a step: earlier ones are refused and store nothing."""
    for count in range(1, len(lines) + 1):
        response = user.gateway.post(PATH, content=b"".join(lines[:count]), headers=user.headers)
        if response.status_code == 200:
            assert response.json()["result"] == "created"
            return count, response.json()["trace_id"]
        assert response.status_code == 422 and "no message" in response.json()["detail"]
    raise AssertionError("no cut of the fixture holds a step")


def test_older_and_duplicate_snapshots_are_no_ops(user: User, ingest: Any) -> None:
    lines = _lines(real_fixture(GROWING))
    created = user.upload(b"".join(lines))
    before = _trace(ingest, user.id, created["trace_id"])

    duplicate = user.upload(b"".join(lines))
    older = user.upload(b"".join(lines[: len(lines) // 2]))

    assert duplicate["result"] == older["result"] == "unchanged"
    after = _trace(ingest, user.id, created["trace_id"])
    assert after.trace.revision == before.trace.revision
    assert [step.id for step in after.trace.steps] == [step.id for step in before.trace.steps]


def test_divergent_snapshot_is_refused_and_the_review_kept(user: User, ingest: Any) -> None:
    raw = real_fixture("claude-code/spotter-v2.1-tool-heavy.jsonl")
    created = user.upload(raw)
    stored = _trace(ingest, user.id, created["trace_id"])
    step = next(step for step in stored.trace.steps if step.role == 2)  # the first user message
    message = ingest_pb2.CreateAnnotationRequest(
        owner_id=user.id, trace_id=created["trace_id"], step_id=step.id, rating=-1, comment="keep me"
    )
    ingest.CreateAnnotation(message, timeout=30)

    refused = user.upload(_rewritten_first_user_message(raw), expected=409)

    assert refused["error"] == "trace_sync_error"
    assert refused["result"] == "refused"
    assert "diverges" in refused["detail"]
    kept = _trace(ingest, user.id, created["trace_id"])
    assert [s.id for s in kept.trace.steps] == [s.id for s in stored.trace.steps]
    assert [(a.step_id, a.comment) for a in kept.annotations] == [(step.id, "keep me")]


def _rewritten_first_user_message(raw: bytes) -> bytes:
    lines = _lines(raw)
    for index, line in enumerate(lines):
        record = orjson.loads(line)
        content = record.get("message", {}).get("content") if record.get("type") == "user" else None
        if isinstance(content, str):
            record["message"]["content"] = content + " (edited)"
            lines[index] = orjson.dumps(record) + b"\n"
            return b"".join(lines)
    raise AssertionError("the fixture has no typed user message")


def test_other_formats_are_sent_to_the_import_or_opentelemetry(user: User) -> None:
    openai = next((REAL_FIXTURES / "openai-chat").glob("*")).read_bytes()

    detected = user.upload(openai, expected=422)
    named = user.upload(openai, expected=422, agent="openai_chat")

    assert "/traces/import" in detected["detail"] and "otel" in detected["detail"]
    assert "not a native agent transcript" in named["detail"]


def test_unresolved_codex_history_page_is_refused(user: User, ingest: Any) -> None:
    lines = _lines(real_fixture(GROWING))
    meta = orjson.loads(lines[0])
    meta["payload"]["history_base"] = {"thread_id": "0199", "end_ordinal_exclusive": 3, "end_byte_offset": 100}

    refused = user.upload(orjson.dumps(meta) + b"\n" + b"".join(lines[1:]), expected=422)

    assert "history_base" in refused["detail"]
    listed = ingest.ListTraces(ingest_pb2.ListTracesRequest(owner_id=user.id), timeout=30)
    assert list(listed.traces) == []


def test_account_with_reward_models_off_is_refused_and_nothing_stored(
    gateway: TestClient, module_postgres_url: str, ingest: Any
) -> None:
    off = User(gateway, module_postgres_url, "switched-off", enabled=False)

    refused = off.upload(real_fixture(GROWING), expected=403)

    assert "disabled" in refused["detail"]
    listed = ingest.ListTraces(ingest_pb2.ListTracesRequest(owner_id=off.id), timeout=30)
    assert list(listed.traces) == []


def test_native_sources_are_named_after_the_agent_and_the_owner(
    gateway: TestClient, module_postgres_url: str, ingest: Any
) -> None:
    dana = User(gateway, module_postgres_url, "Dana")
    dana.upload(real_fixture(GROWING))
    dana.upload(real_fixture("claude-code/spotter-v2.1-tool-heavy.jsonl"))

    sources = ingest.ListTraceSources(ingest_pb2.ListTraceSourcesRequest(owner_id=dana.id), timeout=30).sources

    assert sorted(source.name for source in sources) == ["Claude Code (Dana)", "Codex (Dana)"]
