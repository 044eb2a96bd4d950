"""The trace REST API end to end: real gateway and ingest processes on PostgreSQL, two users."""

from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from support.fixtures import REAL_FIXTURES
from support.ingest import stash_line
from support.processes import stash_rm
from support.stack import RunningStack


@pytest.fixture(scope="module")
def stack(cluster_stack: RunningStack) -> RunningStack:
    # The cluster profile: every service must be given what it needs (here: PostgreSQL and Redis URLs).
    return cluster_stack.for_module("rest")


def _import(client: httpx.Client, data: str, **fields: Any) -> httpx.Response:
    return client.post("/traces/import", json={"format": "auto", "data": data, **fields})


@pytest.fixture(scope="module")
def alice_trace(alice: httpx.Client) -> dict[str, Any]:
    trace_id = _import(alice, stash_line("alice-1", metadata={"agent": "support-bot"})).json()["trace_ids"][0]
    return alice.get(f"/traces/{trace_id}").json()


def test_formats_lists_every_adapter(alice: httpx.Client) -> None:
    names = {item["name"] for item in alice.get("/formats").json()}

    assert names == {
        "stash",
        "openai_chat",
        "anthropic_messages",
        "otel",
        "langfuse",
        "langsmith",
        "claude_code",
        "codex",
    }


def test_import_detects_the_format_and_lists_the_trace(alice: httpx.Client, alice_trace: dict[str, Any]) -> None:
    listing = alice.get("/traces", params={"source_id": "support-bot"}).json()

    assert alice_trace["source_format"] == "stash"
    assert [step["role"] for step in alice_trace["steps"]] == ["system", "user", "assistant", "tool", "assistant"]
    assert alice_trace["steps"][2]["tool_input"] == {"order_id": "1182"}
    assert listing["total"] == 1 and listing["traces"][0]["id"] == alice_trace["id"]
    assert listing["traces"][0]["title"] == "I want a refund for order 1182"


def test_bad_trace_gets_422_naming_it_and_stores_nothing(alice: httpx.Client) -> None:
    before = alice.get("/traces").json()["total"]
    payload = stash_line("ok-1") + "\n" + orjson.dumps({"steps": [{"role": "user", "content": 42}]}).decode()

    response = _import(alice, payload, format="stash")

    assert response.status_code == 422
    assert "line 2" in response.json()["detail"] and "content" in response.json()["detail"]
    assert alice.get("/traces").json()["total"] == before


def test_undetectable_payload_names_every_format_tried(alice: httpx.Client) -> None:
    response = _import(alice, "just some text")

    assert response.status_code == 422
    assert "tried: stash, otel" in response.json()["detail"]


def test_body_over_the_limit_gets_413(stack: RunningStack, alice: httpx.Client) -> None:
    response = _import(alice, "x" * (int(stack.env["STASH_GATEWAY_MAX_BODY_BYTES"]) + 1))

    assert response.status_code == 413
    assert "limit" in response.json()["detail"]


def test_source_id_longer_than_200_characters_gets_422(alice: httpx.Client) -> None:
    response = _import(alice, stash_line(), source_id="s" * 201)

    assert response.status_code == 422 and response.json()["field"] == "source_id"


def test_another_owners_trace_is_404_on_every_route(bob: httpx.Client, alice_trace: dict[str, Any]) -> None:
    trace_id = alice_trace["id"]
    annotation = {"rating": 1}

    assert bob.get(f"/traces/{trace_id}").status_code == 404
    assert bob.delete(f"/traces/{trace_id}").status_code == 404
    assert bob.post(f"/traces/{trace_id}/annotations", json=annotation).status_code == 404
    assert bob.get("/traces").json()["total"] == 0
    assert bob.get("/export/traces").content == b""
    assert bob.get("/trace-sources").json() == []


def test_another_owners_annotation_is_404(alice: httpx.Client, bob: httpx.Client, alice_trace: dict) -> None:
    created = alice.post(f"/traces/{alice_trace['id']}/annotations", json={"comment": "mine"}).json()

    assert bob.patch(f"/annotations/{created['id']}", json={"rating": -1}).status_code == 404
    assert bob.delete(f"/annotations/{created['id']}").status_code == 404
    assert bob.get("/export/annotations").content == b""
    assert alice.delete(f"/annotations/{created['id']}").status_code == 204


def test_annotation_lifecycle_and_counts(alice: httpx.Client, alice_trace: dict[str, Any]) -> None:
    step = alice_trace["steps"][4]
    quote = {"text": "started a refund", "prefix": "so I have ", "suffix": "."}
    created = alice.post(
        f"/traces/{alice_trace['id']}/annotations", json={"step_id": step["id"], "rating": -1, "quote": quote}
    )
    bad_quote = alice.post(
        f"/traces/{alice_trace['id']}/annotations",
        json={"step_id": step["id"], "comment": "?", "quote": {"text": "not there"}},
    )

    flagged = alice.patch(
        f"/annotations/{created.json()['id']}", json={"label_error": True, "label_error_note": "it was fine"}
    )

    assert created.status_code == 201 and created.json()["quote"] == quote
    assert bad_quote.status_code == 422 and bad_quote.json()["field"] == "quote.text"
    assert flagged.json()["label_error"] is True and flagged.json()["rating"] == -1
    summary = alice.get("/traces", params={"source_id": "support-bot"}).json()["traces"][0]
    assert (summary["negative_count"], summary["label_error_count"]) == (0, 1)
    exported = [orjson.loads(line) for line in alice.get("/export/annotations").content.splitlines()]
    assert [(line["step_index"], line["label_error"]) for line in exported] == [(4, True)]


def test_export_reimports_to_the_same_traces(alice: httpx.Client, bob: httpx.Client) -> None:
    exported = alice.get("/export/traces")

    _import(bob, exported.text, format="stash")

    assert exported.headers["content-type"].startswith("application/x-ndjson")
    assert bob.get("/export/traces").content == exported.content


def test_trace_sources_rename(alice: httpx.Client, alice_trace: dict[str, Any]) -> None:
    renamed = alice.put("/trace-sources", json={"source_id": "support-bot", "name": "Support desk"})

    assert renamed.json()["name"] == "Support desk"
    listed = alice.get("/traces", params={"source_id": "support-bot"}).json()["traces"][0]
    assert listed["source_name"] == "Support desk"
    assert alice.put("/trace-sources", json={"source_id": "x", "name": ""}).status_code == 422


def test_import_date_filter_is_inclusive_of_today(alice: httpx.Client, alice_trace: dict[str, Any]) -> None:
    today = alice_trace["created_at"][:10]

    same_day = alice.get("/traces", params={"imported_from": today, "imported_to": today}).json()
    before = alice.get("/traces", params={"imported_to": "2000-01-01"}).json()

    assert alice_trace["id"] in {trace["id"] for trace in same_day["traces"]}
    assert before["total"] == 0
    assert alice.get("/traces", params={"tz": "Mars/Olympus"}).status_code == 422


def test_read_only_key_can_read_but_not_import(stack: RunningStack, alice: httpx.Client) -> None:
    created = stash_rm("keys", "create", f"alice{stack.user_suffix}", "--read-only", env=stack.env)
    read_key = created.stdout.split("shown once): ")[1]
    with stack.client(read_key.split()[0]) as reader:
        assert reader.get("/traces").status_code == 200
        assert _import(reader, stash_line()).status_code == 403


def test_disabled_user_gets_403_until_enabled(stack: RunningStack, bob: httpx.Client) -> None:
    assert stash_rm("users", "disable", f"bob{stack.user_suffix}", env=stack.env).returncode == 0
    denied = bob.get("/traces")
    assert stash_rm("users", "enable", f"bob{stack.user_suffix}", env=stack.env).returncode == 0

    assert denied.status_code == 403 and "disabled" in denied.json()["detail"]
    assert bob.get("/traces").status_code == 200


def test_cli_import_uploads_files(stack: RunningStack, tmp_path: Path) -> None:
    key = stack.create_user("carol")
    trace_file = tmp_path / "traces.jsonl"
    trace_file.write_text(stash_line("cli-1") + "\n" + stash_line("cli-2") + "\n")
    env = {**stack.env, "STASH_URL": stack.gateway_url, "STASH_API_KEY": key}

    result = stash_rm("import", str(trace_file), "--source-id", "from-cli", env=env)

    assert result.returncode == 0, result.stderr
    assert "Imported 2 trace(s) from 1 of 1 file(s)" in result.stdout
    with stack.client(key) as carol:
        assert carol.get("/traces", params={"source_id": "from-cli"}).json()["total"] == 2


def test_cli_sessions_import_finds_claude_code_and_codex(stack: RunningStack, tmp_path: Path) -> None:
    claude_dir, codex_dir = tmp_path / "claude", tmp_path / "codex" / "2026" / "11"
    (claude_dir / "project").mkdir(parents=True)
    codex_dir.mkdir(parents=True)
    (claude_dir / "project" / "s.jsonl").write_bytes(
        (REAL_FIXTURES / "claude-code/spotter-v2.1-tool-heavy.jsonl").read_bytes()
    )
    codex_file = REAL_FIXTURES / "codex/localpush-codex-desktop-0.104-redacted-parallel-calls.jsonl"
    (codex_dir / "rollout-2026-11-01-x.jsonl").write_bytes(codex_file.read_bytes())
    key = stack.create_user("dave")
    env = {**stack.env, "STASH_URL": stack.gateway_url, "STASH_API_KEY": key}
    args = ["sessions", "import", "--claude-dir", str(claude_dir), "--codex-dir", str(tmp_path / "codex")]

    first = stash_rm(*args, env=env)
    second = stash_rm(*args, env=env)

    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    with stack.client(key) as dave:
        formats = sorted(trace["source_format"] for trace in dave.get("/traces").json()["traces"])
    assert formats == ["claude_code", "codex"]
