"""The trace list API end to end: each row's process patterns, sorting all pages by source, gzip answers."""

import gzip
import time
from typing import Any

import httpx
import orjson
import pytest

from support.claude_code import looping_test_session
from support.ingest import stash_line
from support.long_trace import long_trace_line
from support.stack import RunningStack

WAIT_S = 30


@pytest.fixture(scope="module")
def stack(embedded_stack: RunningStack) -> RunningStack:
    return embedded_stack.for_module("list")


def _imported(client: httpx.Client, data: str, fmt: str = "stash", **fields: Any) -> str:
    response = client.post("/traces/import", json={"format": fmt, "data": data, **fields})
    assert response.status_code == 200, response.text
    return response.json()["trace_ids"][0]


def _evaluated(client: httpx.Client, trace_id: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if (client.get(f"/traces/{trace_id}").json()["evaluation"] or {}).get("status") == "succeeded":
            return
        time.sleep(0.1)
    raise TimeoutError(f"trace {trace_id} was not evaluated within {WAIT_S}s")


def test_each_listed_trace_names_its_process_patterns_by_first_step(alice: httpx.Client) -> None:
    looping = _imported(alice, looping_test_session(), "claude_code")
    plain = _imported(alice, stash_line("plain-1"))
    _evaluated(alice, looping)
    _evaluated(alice, plain)

    found = alice.get(f"/traces/{looping}").json()["process_patterns"]
    by_first_step = sorted(found, key=lambda item: (item["first_step_index"], item["pattern"]))

    listed = {trace["id"]: trace for trace in alice.get("/traces").json()["traces"]}

    assert {item["pattern"] for item in found} == {"stuck_on_test", "ping_pong", "repetition_loop"}
    assert listed[looping]["process_patterns"] == [item["pattern"] for item in by_first_step]
    assert listed[plain]["process_patterns"] == []
    filtered = alice.get("/traces", params={"pattern": "ping_pong"}).json()["traces"]
    assert [trace["process_patterns"] for trace in filtered] == [listed[looping]["process_patterns"]]


def test_sort_by_source_runs_across_pages_by_display_name(bob: httpx.Client) -> None:
    for source_id in ("beta", "Alpha", "gamma", "beta"):
        _imported(bob, stash_line(f"{source_id}-{time.monotonic_ns()}"), source_id=source_id)
    # A display name sorts where the name puts it, not where its id would.
    assert bob.put("/trace-sources", json={"source_id": "gamma", "name": "Aardvark"}).status_code == 200

    def sources(sort: str) -> list[str]:
        pages = [bob.get("/traces", params={"sort": sort, "limit": 1, "offset": offset}).json() for offset in range(4)]
        assert {page["total"] for page in pages} == {4}
        return [page["traces"][0]["source_id"] for page in pages]

    assert sources("source") == ["gamma", "Alpha", "beta", "beta"]
    assert sources("-source") == ["beta", "beta", "Alpha", "gamma"]
    newest_first = [trace["source_id"] for trace in bob.get("/traces").json()["traces"]]
    assert newest_first == ["beta", "gamma", "Alpha", "beta"]


def test_an_unknown_sort_is_422_naming_it(alice: httpx.Client) -> None:
    response = alice.get("/traces", params={"sort": "title"})

    assert response.status_code == 422
    assert "sort" in response.text


def test_large_answers_are_gzipped_for_clients_that_accept_it(alice: httpx.Client) -> None:
    trace_id = _imported(alice, long_trace_line(500))
    _evaluated(alice, trace_id)
    plain = alice.get(f"/traces/{trace_id}", headers={"Accept-Encoding": "identity"})
    with alice.stream("GET", f"/traces/{trace_id}", headers={"Accept-Encoding": "gzip"}) as zipped:
        raw = b"".join(zipped.iter_raw())

    assert "content-encoding" not in plain.headers
    assert zipped.headers["content-encoding"] == "gzip"
    assert len(raw) < len(plain.content) / 5
    assert orjson.loads(gzip.decompress(raw)) == plain.json()
    small = alice.get("/traces", params={"pattern": "expansion_drift"}, headers={"Accept-Encoding": "gzip"})
    assert "content-encoding" not in small.headers


def test_a_streamed_attachment_stays_a_valid_download_when_gzipped(alice: httpx.Client) -> None:
    with alice.stream("GET", "/export/traces", headers={"Accept-Encoding": "gzip"}) as response:
        assert response.headers["content-encoding"] == "gzip"
        assert response.headers["content-disposition"].startswith("attachment")
        raw = b"".join(response.iter_raw())

    lines = gzip.decompress(raw).splitlines()
    assert len(lines) == alice.get("/traces").json()["total"]
    assert all(orjson.loads(line)["id"] for line in lines)
