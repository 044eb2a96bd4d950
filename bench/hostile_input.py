"""Hostile and oversized input against a whole embedded stack: answers, seconds and peak RSS.

Starts `stash-rm up` (embedded profile, free ports, a fresh data directory), then sends, one after
the other: a 40 MB import at the traces-per-import limit (accepted), a 40 MB import of 90k traces (413),
a 1 GB gzip bomb to OTLP/HTTP (413), a 200,000-level nested JSON import and annotation body (4xx), and a
trace at the step and byte limits whose reads are timed (GET /traces/{id} whole and one 1,000-step page, the
median of five each). For each case the table shows the HTTP status, the seconds it took and the peak
RSS of the gateway and ingest processes during it (Linux `VmHWM`, reset before each case through
`/proc/<pid>/clear_refs`).

    .venv/bin/python bench/hostile_input.py [--reads 5]
"""

from __future__ import annotations

import argparse
import gzip
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
from rich.console import Console
from rich.table import Table

sys.path[:0] = [str(Path(__file__).parents[1] / "tests")]

from stash_ingest.limits import DEFAULT_LIMITS  # noqa: E402
from support.stack import RunningStack, running_stack  # noqa: E402

MB = 1024 * 1024
SERVICES = ("gateway", "ingest")


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident set since the last reset, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM for process {pid}")


def reset_peak(pid: int) -> None:
    """Start a new peak-RSS window (Linux: writing 5 to clear_refs resets VmHWM to the current RSS)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def stash_payload(traces: int, bytes_per_trace: int) -> str:
    """`traces` small support conversations of about `bytes_per_trace` bytes each, as JSONL."""
    filler = "x" * max(bytes_per_trace - 300, 0)
    lines = []
    for number in range(traces):
        steps = [
            {"role": "user", "content": f"Where is order {number}? {filler}"},
            {"role": "assistant", "content": "", "tool_name": "lookup_order", "tool_input": {"id": number}},
            {"role": "tool", "content": '{"status": "in transit"}'},
            {"role": "assistant", "content": "It is in transit."},
        ]
        lines.append(orjson.dumps({"id": f"bench-{number}", "steps": steps}).decode())
    return "\n".join(lines)


def largest_trace() -> str:
    """One trace at the steps-per-trace limit, its text filling the per-trace byte limit."""
    steps = DEFAULT_LIMITS.steps_per_trace
    chars = DEFAULT_LIMITS.trace_bytes // steps - 64  # headroom for each step's `{}` metadata
    body = [{"role": "user" if n % 2 == 0 else "assistant", "content": f"{n} " + "y" * chars} for n in range(steps)]
    return orjson.dumps({"id": "largest", "steps": body}).decode()


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


class Bench:
    """One stack, one user, and a row per case."""

    def __init__(self, stack: RunningStack) -> None:
        self.stack = stack
        self.key = stack.create_user("bench")
        self.client = httpx.Client(base_url=stack.api_url, headers={"Authorization": f"Bearer {self.key}"}, timeout=900)
        self.rows: list[tuple[str, str, float, float, float]] = []

    def case(self, name: str, send: Callable[[], httpx.Response]) -> httpx.Response:
        pids = {service: self.stack.pid(service) for service in SERVICES}
        for pid in pids.values():
            reset_peak(pid)
        started = time.perf_counter()
        response = send()
        seconds = time.perf_counter() - started
        rss = [peak_rss_mb(pids[service]) for service in SERVICES]
        self.rows.append((name, f"{response.status_code} {_reason(response)}", seconds, *rss))
        return response

    def import_(self, data: str) -> httpx.Response:
        return self.client.post("/traces/import", json={"format": "stash", "data": data})


def _reason(response: httpx.Response) -> str:
    if response.status_code < 400:
        return ""
    try:
        body: Any = response.json()
        detail = body.get("detail") or body.get("message", "")
    except ValueError:
        detail = response.text
    return str(detail)[:60]


def run(bench: Bench, reads: int) -> list[tuple[str, str, float]]:
    at_limit = stash_payload(DEFAULT_LIMITS.traces_per_import, 40 * MB // DEFAULT_LIMITS.traces_per_import)
    bench.case(
        f"import {len(at_limit) / MB:.0f} MB, {DEFAULT_LIMITS.traces_per_import:,} traces",
        lambda: bench.import_(at_limit),
    )
    many = stash_payload(90_000, 40 * MB // 90_000)
    bench.case(f"import {len(many) / MB:.0f} MB, 90,000 traces", lambda: bench.import_(many))
    bomb = gzip.compress(b"\0" * (1024 * MB), compresslevel=9)
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}  # a JSON google.rpc.Status back
    bench.case(
        f"OTLP gzip bomb ({len(bomb) / MB:.1f} MB → 1 GB)",
        lambda: bench.client.post("/otel/v1/traces", content=bomb, headers=headers),
    )
    deep = nested(200_000)
    bench.case("import of JSON nested 200,000 deep", lambda: bench.import_(deep))
    deep_body = '{"comment": ' + nested(200_000) + "}"
    bench.case(
        "annotation body nested 200,000 deep",
        lambda: bench.client.post(
            "/traces/none/annotations", content=deep_body, headers={"Content-Type": "application/json"}
        ),
    )
    largest = largest_trace()
    imported = bench.case(f"import the largest trace ({len(largest) / MB:.0f} MB)", lambda: bench.import_(largest))
    trace_id = imported.json()["trace_ids"][0]
    whole = median_read(bench, f"/traces/{trace_id}", reads)
    paged = median_read(bench, f"/traces/{trace_id}?steps_offset=5000&steps_limit=1000", reads)
    bench.case("GET /traces/{id} of the largest trace", lambda: bench.client.get(f"/traces/{trace_id}"))
    return [
        (f"GET /traces/{{id}}, largest trace, all {DEFAULT_LIMITS.steps_per_trace:,} steps", f"{reads} reads", whole),
        ("GET /traces/{id}, largest trace, 1,000 steps (steps_limit)", f"{reads} reads", paged),
    ]


def median_read(bench: Bench, path: str, reads: int) -> float:
    """The median seconds of `reads` GETs of `path`."""
    timings = []
    for _ in range(reads):
        started = time.perf_counter()
        bench.client.get(path).raise_for_status()
        timings.append(time.perf_counter() - started)
    return statistics.median(timings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reads", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="stash-hostile-") as data_dir, running_stack(Path(data_dir)) as stack:
        bench = Bench(stack)
        reads = run(bench, args.reads)
    table = Table("case", "answer", "seconds", "gateway peak RSS (MiB)", "ingest peak RSS (MiB)", title="Hostile input")
    for name, answer, seconds, gateway, ingest in bench.rows:
        table.add_row(name, answer, f"{seconds:.2f}", f"{gateway:.0f}", f"{ingest:.0f}")
    for name, answer, seconds in reads:
        table.add_row(name, answer, f"median {seconds:.3f}", "", "")
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
