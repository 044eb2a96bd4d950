"""`stash-rm export` / `stash-rm import` on the cluster profile: a whole account written to one file on one
stack, restored into a fresh account on a second stack with its own, empty PostgreSQL database, and exported
again to the same file, but for the ids the platform hands out and the timestamps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import redis

from support.fixtures import real_fixture
from support.ingest import stash_line
from support.processes import stash_rm
from support.stack import RunningStack, cluster_env, running_stack

USER = "carol"


def _stack(data_dir: Path, postgres_url: str, redis_url: str) -> Any:
    # Each stack starts on an empty Redis too, as a restored installation may (Redis holds no truth).
    with redis.Redis.from_url(redis_url) as client:
        client.flushdb()
    return running_stack(data_dir, **cluster_env(postgres_url, redis_url))


def _ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, f"{response.request.method} {response.request.url}: {response.text}"
    return response.json() if response.content else None


def _fill(stack: RunningStack, client: httpx.Client, key: str) -> None:
    """Traces of four formats from three sources, ratings, comments, quotes, flags and a named source."""
    shop = "\n".join(
        [
            stash_line("shop-1", title="Refund", metadata={"agent": "support-bot", "tier": 2}),
            stash_line("shop-2"),
        ]
    )
    shop_ids = _ok(client.post("/traces/import", json={"format": "stash", "data": shop, "source_id": "shop"}))
    langfuse = real_fixture("langfuse/trpc-openai-agents-2025-09-30.trace.json").decode()
    _ok(client.post("/traces/import", json={"format": "auto", "data": langfuse}))
    otlp = real_fixture("otlp/genai-interlingua-openllmetry-0.62.3.json")
    otlp_headers = {"Content-Type": "application/json"}
    _ok(client.post("/otel/v1/traces", content=otlp, headers=otlp_headers))
    transcript = real_fixture("claude-code/spotter-v2.1-tool-heavy.jsonl")
    upload = httpx.post(
        f"{stack.gateway_url}/api/v1/me/transcripts",
        content=transcript,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/x-ndjson"},
        timeout=120,
    )
    _ok(upload)
    first, second = shop_ids["trace_ids"]
    steps = _step_ids(client, first)
    _annotate(client, first, {"comment": "a good conversation overall"})
    _annotate(client, first, {"step_id": steps[2], "rating": 1})
    quote = {"text": "refund", "prefix": "I want a ", "suffix": " for order 1182"}
    _annotate(client, first, {"step_id": steps[1], "rating": -1, "comment": "vague", "quote": quote})
    flagged = _annotate(client, second, {"step_id": _step_ids(client, second)[4], "rating": 1})
    _ok(client.patch(f"/annotations/{flagged}", json={"label_error": True, "label_error_note": "not a refund"}))
    _ok(client.put("/trace-sources", json={"source_id": "shop", "name": "The shop"}))


def _step_ids(client: httpx.Client, trace_id: str) -> list[str]:
    return [step["id"] for step in _ok(client.get(f"/traces/{trace_id}"))["steps"]]


def _annotate(client: httpx.Client, trace_id: str, body: dict[str, Any]) -> str:
    return str(_ok(client.post(f"/traces/{trace_id}/annotations", json=body), 201)["id"])


def _cli(stack: RunningStack, key: str, *args: str) -> Any:
    return stash_rm(*args, env={**stack.env, "STASH_API_KEY": key}, timeout_s=300)


def _comparable(path: Path) -> list[dict[str, Any]]:
    """The export's records with the exporting installation's trace and user ids replaced by their order of
    appearance in the file, and without timestamps: what must survive a restore unchanged (a restored account
    is a new user, so its annotations' `author_id` is new, but who wrote which stays)."""
    records = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    position = {record["trace_id"]: index for index, record in enumerate(records) if record["kind"] == "trace"}
    authors: dict[str, int] = {}
    for record in records:
        record.pop("exported_at", None)
        record.pop("created_at", None)
        if "trace_id" in record:
            record["trace_id"] = position[record["trace_id"]]
        if "author_id" in record:
            record["author_id"] = authors.setdefault(record["author_id"], len(authors))
    return records


@pytest.fixture(scope="module")
def exported(
    tmp_path_factory: pytest.TempPathFactory, module_postgres_url: str, module_redis_url: str
) -> dict[str, Any]:
    """The first stack's account written with `stash-rm export`, with what its API showed of it."""
    path = tmp_path_factory.mktemp("export") / "carol.jsonl"
    with _stack(tmp_path_factory.mktemp("first"), module_postgres_url, module_redis_url) as stack:
        key = stack.create_user(USER)
        with stack.client(key) as client:
            _fill(stack, client, key)
            result = _cli(stack, key, "export", str(path))
            assert result.returncode == 0, result.stderr
            shown = {"sources": _sources(client), "traces": _titles(client)}
    # The first stack is stopped before the tests start theirs: they share the tests' Redis database.
    return {"path": path, "stdout": result.stdout, **shown}


def _sources(client: httpx.Client) -> list[dict[str, Any]]:
    return [{k: v for k, v in s.items() if k != "owner_id"} for s in _ok(client.get("/trace-sources"))]


def _titles(client: httpx.Client) -> list[tuple[Any, ...]]:
    """What the list shows of each trace, newest import first."""
    listed = _ok(client.get("/traces", params={"limit": 500}))["traces"]
    return [(t["external_id"], t["title"], t["source_id"], t["source_name"], t["step_count"]) for t in listed]


def test_an_account_round_trips_through_a_fresh_stack(
    tmp_path: Path, exported: dict[str, Any], empty_postgres_url: str, module_redis_url: str
) -> None:
    again = tmp_path / "again.jsonl"
    with _stack(tmp_path / "second", empty_postgres_url, module_redis_url) as stack:
        key = stack.create_user(USER)
        imported = _cli(stack, key, "import", str(exported["path"]))
        assert imported.returncode == 0, imported.stderr
        assert _cli(stack, key, "export", str(again)).returncode == 0
        with stack.client(key) as client:
            assert _sources(client) == exported["sources"]
            assert _titles(client) == exported["traces"]
        refused = _cli(stack, key, "import", str(exported["path"]))

    original = _comparable(exported["path"])
    kinds = [record["kind"] for record in original]
    assert (kinds.count("trace"), kinds.count("annotation"), kinds.count("source")) == (5, 4, 2)
    assert "Exported 5 traces, 4 annotations, 2 source names" in exported["stdout"]
    assert "Imported 5 traces, 4 annotations, 2 source names" in imported.stdout
    assert _comparable(again) == original
    assert refused.returncode == 1 and "already has 5 traces" in refused.stderr


def test_an_incomplete_export_is_refused_before_anything_is_imported(
    tmp_path: Path, exported: dict[str, Any], empty_postgres_url: str, module_redis_url: str
) -> None:
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(b"".join(exported["path"].read_bytes().splitlines(keepends=True)[:-1]))
    with _stack(tmp_path / "third", empty_postgres_url, module_redis_url) as stack:
        key = stack.create_user(USER)
        result = _cli(stack, key, "import", str(cut))
        with stack.client(key) as client:
            total = _ok(client.get("/traces"))["total"]

    assert result.returncode == 1 and "is incomplete" in result.stderr, result.stderr
    assert total == 0
