"""`stash-rm sessions import` and `sessions upload` against a real gateway (uvicorn) and ingest on PostgreSQL."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import uvicorn
from typer.testing import CliRunner

from stash.rm.v1 import ingest_pb2
from stash_cli.codex_pages import lf_records
from stash_cli.hook_runner import enqueue_claude_code, enqueue_codex
from stash_cli.hooks import Home, flush, install, uninstall
from stash_cli.main import app
from stash_common.db import make_engine, make_sessions, transaction, upgrade
from stash_common.settings import load
from stash_gateway import store as gateway_store
from stash_gateway.app import create_app
from stash_gateway.settings import GatewaySettings
from stash_ingest.adapters.codex import parse_codex
from stash_ingest.titles import derive_title
from support.fixtures import REAL_FIXTURES, real_fixture
from support.ingest import serve_ingest
from support.processes import free_port

CODEX_FIXTURE = "codex/localpush-codex-desktop-0.104-redacted-compaction-images.jsonl"
SESSION_IDS = [f"0199{n:04x}-0000-7000-8000-{n:012x}" for n in range(1, 4)]


@pytest.fixture(scope="module")
def ingest(module_postgres_url: str) -> Iterator[tuple[Any, int]]:
    port = free_port()
    stub, stop = serve_ingest(module_postgres_url, derive_title, port=port)
    yield stub, port
    stop()


@pytest.fixture(scope="module")
def gateway_url(
    module_postgres_url: str, ingest: tuple[Any, int], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    upgrade("gateway", gateway_store.MIGRATIONS_DIR, module_postgres_url)
    settings = load(
        GatewaySettings,
        database_url=module_postgres_url,
        data_dir=tmp_path_factory.mktemp("gateway"),
        ingest_address=f"127.0.0.1:{ingest[1]}",
        otlp_grpc_port=0,
    )
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    started = threading.Event()
    while not started.wait(0.05):  # a readiness wait for the server thread, not a timed assertion
        if server.started or not thread.is_alive():
            started.set()
    assert server.started, "the gateway did not start"
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join()


def _user(database_url: str, name: str) -> tuple[str, str]:
    with transaction(make_sessions(make_engine(database_url))) as session:
        user = gateway_store.create_user(session, name)
        _, key = gateway_store.create_key(session, user.id, "full", read_only=False)
    return user.id, key


def _run(gateway_url: str, key: str, home: Path, *args: str) -> Any:
    env = {"STASH_URL": gateway_url, "STASH_API_KEY": key, "HOME": str(home), "COLUMNS": "200"}
    return CliRunner().invoke(app, list(args), env=env)


def _traces(ingest: tuple[Any, int], owner_id: str) -> list[Any]:
    return list(ingest[0].ListTraces(ingest_pb2.ListTracesRequest(owner_id=owner_id), timeout=30).traces)


def _codex_pages(codex_dir: Path) -> list[Path]:
    """One session in two pages (the second continues the first) and a second session in one file."""
    records = lf_records(real_fixture(CODEX_FIXTURE))
    first = records[:30]
    meta = orjson.loads(records[0])
    meta["payload"]["history_base"] = {
        "thread_id": SESSION_IDS[0],
        "end_ordinal_exclusive": len(first),
        "end_byte_offset": len(b"".join(first)),
    }
    folder = codex_dir / "2026" / "11" / "01"
    folder.mkdir(parents=True)
    pages = [folder / f"rollout-2026-11-01T10-0{n}-00-{SESSION_IDS[n]}.jsonl" for n in range(3)]
    pages[0].write_bytes(b"".join(first))
    pages[1].write_bytes(orjson.dumps(meta) + b"\n" + b"".join(records[30:]))
    pages[2].write_bytes(real_fixture("codex/codemie-codex-tui-0.125-rollout.jsonl"))
    for minute, page in enumerate(pages):
        os.utime(page, (1_800_000_000 + minute, 1_800_000_000 + minute))
    return pages


def test_sessions_import_uploads_the_newest_snapshot_of_every_session(
    gateway_url: str, module_postgres_url: str, ingest: tuple[Any, int], tmp_path: Path
) -> None:
    owner_id, key = _user(module_postgres_url, "importer")
    claude_dir = tmp_path / ".claude" / "projects"
    (claude_dir / "project").mkdir(parents=True)
    (claude_dir / "project" / "s.jsonl").write_bytes(real_fixture("claude-code/spotter-v2.1-tool-heavy.jsonl"))
    _codex_pages(tmp_path / ".codex" / "sessions")
    dirs = ["--claude-dir", str(claude_dir), "--codex-dir", str(tmp_path / ".codex" / "sessions")]

    first = _run(gateway_url, key, tmp_path, "sessions", "import", *dirs)
    second = _run(gateway_url, key, tmp_path, "sessions", "import", *dirs)

    assert first.exit_code == 0, first.output
    assert "Sessions: 3 created, 0 appended, 0 unchanged, 0 refused, 0 failed." in first.output
    assert "Sessions: 0 created, 0 appended, 3 unchanged, 0 refused, 0 failed." in second.output
    traces = _traces(ingest, owner_id)
    assert sorted(trace.source_format for trace in traces) == ["claude_code", "codex", "codex"]
    session_id = orjson.loads(real_fixture(CODEX_FIXTURE).split(b"\n")[0])["payload"]["id"]
    rebuilt = next(trace for trace in traces if trace.external_id == session_id)
    assert rebuilt.step_count == len(parse_codex(real_fixture(CODEX_FIXTURE))[0].steps)  # both pages, whole


def test_sessions_upload_appends_a_grown_file_and_reports_a_divergent_one(
    gateway_url: str, module_postgres_url: str, ingest: tuple[Any, int], tmp_path: Path
) -> None:
    _, key = _user(module_postgres_url, "uploader")
    records = lf_records(real_fixture("claude-code/spotter-v2.1-tool-heavy.jsonl"))
    transcript = tmp_path / "session.jsonl"
    transcript.write_bytes(b"".join(records[:20]))
    created = _run(gateway_url, key, tmp_path, "sessions", "upload", str(transcript))
    transcript.write_bytes(b"".join(records))
    appended = _run(gateway_url, key, tmp_path, "sessions", "upload", str(transcript))
    transcript.write_bytes(b"".join(records[:20]) + b"".join(reversed(records[20:])))
    refused = _run(gateway_url, key, tmp_path, "sessions", "upload", str(transcript))

    assert "1 created" in created.output and created.exit_code == 0
    assert "1 appended" in appended.output and appended.exit_code == 0
    assert "1 refused" in refused.output and refused.exit_code == 1
    assert "trace_sync_error" in refused.output


def test_sessions_upload_of_a_page_without_its_base_fails_explicitly(
    gateway_url: str, module_postgres_url: str, ingest: tuple[Any, int], tmp_path: Path
) -> None:
    owner_id, key = _user(module_postgres_url, "no-base")
    pages = _codex_pages(tmp_path / "sessions")
    pages[0].unlink()

    result = _run(
        gateway_url, key, tmp_path, "sessions", "upload", str(pages[1]), "--codex-dir", str(tmp_path / "sessions")
    )

    assert result.exit_code == 1
    assert f"{SESSION_IDS[0]} is not on this machine" in result.output
    assert "1 failed" in result.output
    assert _traces(ingest, owner_id) == []


def test_other_formats_are_not_uploaded_as_sessions(
    gateway_url: str, module_postgres_url: str, ingest: tuple[Any, int], tmp_path: Path
) -> None:
    _, key = _user(module_postgres_url, "other-format")
    other = next((REAL_FIXTURES / "openai-chat").glob("*"))

    result = _run(gateway_url, key, tmp_path, "sessions", "upload", str(other))

    assert result.exit_code == 1
    assert "HTTP 422" in result.output and "/traces/import" in result.output


def test_a_hook_upload_that_failed_is_retried_on_the_next_run(
    gateway_url: str, module_postgres_url: str, ingest: tuple[Any, int], tmp_path: Path
) -> None:
    owner_id, key = _user(module_postgres_url, "hooked")
    home = Home(tmp_path)
    transcript = tmp_path / "session.jsonl"
    transcript.write_bytes(real_fixture("claude-code/spotter-v2.1-tool-heavy.jsonl"))
    install(home, "claude-code", f"http://127.0.0.1:{free_port()}", key)  # nothing listens there
    enqueue_claude_code(home.state, {"session_id": "s", "transcript_path": str(transcript)})

    assert flush(home) == (0, 1)
    assert _traces(ingest, owner_id) == []
    uninstall(home, "claude-code")
    install(home, "claude-code", gateway_url, key)
    retried = CliRunner().invoke(app, ["hooks", "flush"], env={"HOME": str(tmp_path)})
    assert "Uploaded 1 session(s); 0 wait for the next run." in retried.output, retried.output
    assert [trace.source_format for trace in _traces(ingest, owner_id)] == ["claude_code"]


def test_the_codex_hook_uploads_the_newest_page_of_its_session_rebuilt(
    gateway_url: str, module_postgres_url: str, ingest: tuple[Any, int], tmp_path: Path
) -> None:
    owner_id, key = _user(module_postgres_url, "codex-hooked")
    home = Home(tmp_path)
    _codex_pages(home.codex_sessions)
    session_id = orjson.loads(real_fixture(CODEX_FIXTURE).split(b"\n")[0])["payload"]["id"]
    install(home, "codex", gateway_url, key)
    enqueue_codex(home.state, {"type": "agent-turn-complete", "thread-id": session_id})

    assert flush(home) == (1, 0)
    (trace,) = _traces(ingest, owner_id)
    assert trace.external_id == session_id
    assert trace.step_count == len(parse_codex(real_fixture(CODEX_FIXTURE))[0].steps)
