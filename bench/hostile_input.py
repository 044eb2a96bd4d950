"""Hostile and oversized input, sent concurrently, against a whole embedded stack while another user works.

Starts `stash-rm up` (embedded profile, free ports, a fresh data directory). An attacker's key then sends,
case by case, `--concurrency` copies of one request at once: in every import format a trace far over the
step limit (1,000,000 steps, or as many as the format's encoding fits in the 50 MB body limit), in the
formats with spans of their own a trace far over the span limit, an import far over the trace limit
(90,000 traces, or as many as fit), one span of as many messages as fit sent live to OTLP/HTTP as protobuf,
a 1 GB gzip bomb to OTLP/HTTP, JSON nested 200,000 deep, and an
import at the limits that is accepted. For each case the table shows the answers (status × count), the
slowest request's seconds, and the peak RSS of the gateway and ingest during it (Linux `VmHWM`, reset
before each case through `/proc/<pid>/clear_refs`). A key may run two imports at once (the gateway's
default), so a third concurrent copy is answered 429 at once.

Meanwhile a second user imports a small trace in a loop: the median and 95th percentile of its latency
during the attack are printed beside the same figures on the quiet stack, with the machine's load.
Last, a trace at the step and byte limits is imported and its reads are timed (GET /traces/{id} whole and
one 1,000-step page, the median of `--reads` each).

    .venv/bin/python bench/hostile_input.py [--concurrency 3] [--reads 5] [--formats stash,otel,...]
"""

from __future__ import annotations

import argparse
import gzip
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
from google.rpc import status_pb2
from rich.console import Console
from rich.table import Table

sys.path[:0] = [str(Path(__file__).parents[1] / "tests")]

from stash_ingest.adapters.registry import NATIVE_FORMATS  # noqa: E402
from stash_ingest.limits import DEFAULT_LIMITS  # noqa: E402
from support.hostile import LONG_TRACE, MANY_TRACES, WIDE_TRACE, otlp_protobuf_steps  # noqa: E402
from support.stack import RunningStack, running_stack  # noqa: E402

MB = 1024 * 1024
BODY_ROOM = 48 * MB  # what a request body may reach: the gateway refuses bodies over 50 MB by their size alone
SERVICES = ("gateway", "ingest")
Send = Callable[[httpx.Client], httpx.Response]


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident set since the last reset, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM for process {pid}")


def reset_peak(pid: int) -> None:
    """Start a new peak-RSS window (Linux: writing 5 to clear_refs resets VmHWM to the current RSS)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def load() -> str:
    """The machine's 1-minute load average and its core count."""
    return f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"


# --- requests -----------------------------------------------------------------------------------


def import_body(format_name: str, payload: bytes) -> bytes:
    """The JSON body of POST /traces/import, or the raw body of a native transcript upload."""
    if format_name in NATIVE_FORMATS:
        return payload
    return orjson.dumps({"format": format_name, "data": payload.decode()})


def sender(format_name: str, body: bytes) -> Send:
    """A request sending `body` to the route of its format."""
    if format_name in NATIVE_FORMATS:
        return lambda client: client.post(f"/api/v1/me/transcripts?agent={format_name}", content=body)
    headers = {"Content-Type": "application/json"}
    return lambda client: client.post("/api/v1/rm/traces/import", content=body, headers=headers)


def fitting(format_name: str, build: Callable[[int], bytes], count: int) -> tuple[int, bytes]:
    """`build(count)`'s body, or the body of as many as fit in the body limit, and that count."""
    body = import_body(format_name, build(count))
    while len(body) > BODY_ROOM:
        count = int(count * BODY_ROOM / len(body) * 0.97)
        body = import_body(format_name, build(count))
    return count, body


def hostile_cases(formats: set[str]) -> Iterator[tuple[str, Send]]:
    """(name, request) of every case in these formats, in the order they are sent, each built when reached."""
    yield _at_the_limits()
    for shape, builders, count in (
        ("a {:,}-step trace", LONG_TRACE, 1_000_000),
        ("a {:,}-span trace", WIDE_TRACE, 1_000_000),
        ("{:,} traces", MANY_TRACES, 90_000),
    ):
        for name, build in builders.items():
            if name not in formats:
                continue
            fitted, body = fitting(name, build, count)
            yield f"{name}: {shape.format(fitted)} ({len(body) / MB:.0f} MB)", sender(name, body)
    if "otel" in formats:
        yield _live_otlp()
    bomb = gzip.compress(b"\0" * (1024 * MB), compresslevel=9)
    bomb_headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    yield (
        f"OTLP gzip bomb ({len(bomb) / MB:.1f} MB → 1 GB)",
        lambda client: client.post("/api/v1/rm/otel/v1/traces", content=bomb, headers=bomb_headers),
    )
    deep = import_body("stash", b"[" * 200_000 + b"]" * 200_000)
    yield "stash: JSON nested 200,000 deep", sender("stash", deep)


def _live_otlp() -> tuple[str, Send]:
    """OTLP/HTTP protobuf, as an exporter sends it live: one span of as many messages as fit the body."""
    count = 1_000_000
    body = otlp_protobuf_steps(count)
    while len(body) > BODY_ROOM:
        count = int(count * BODY_ROOM / len(body) * 0.97)
        body = otlp_protobuf_steps(count)
    headers = {"Content-Type": "application/x-protobuf"}
    return (
        f"OTLP/HTTP protobuf: one span of {count:,} messages ({len(body) / MB:.0f} MB)",
        lambda client: client.post("/api/v1/rm/otel/v1/traces", content=body, headers=headers),
    )


def _at_the_limits() -> tuple[str, Send]:
    """An import of as many traces as an import may hold, about 40 MB in all: accepted."""
    traces = DEFAULT_LIMITS.traces_per_import
    filler = "x" * (40 * MB // traces - 300)
    lines = [
        orjson.dumps({"id": f"bench-{n}", "steps": [{"role": "user", "content": f"order {n}? {filler}"}]})
        for n in range(traces)
    ]
    body = import_body("stash", b"\n".join(lines))
    return f"stash: {traces:,} traces at the limit ({len(body) / MB:.0f} MB, accepted)", sender("stash", body)


# --- the other user ----------------------------------------------------------------------------


@dataclass
class Bystander:
    """Another user importing one small trace after the other; each import's end time and seconds."""

    client: httpx.Client
    timings: list[tuple[float, float]] = field(default_factory=list)
    failures: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        number = 0
        while not self.stop.is_set():
            number += 1
            trace = {"id": f"bystander-{number}", "steps": [{"role": "user", "content": f"question {number}"}]}
            started = time.perf_counter()
            response = self.client.post(
                "/api/v1/rm/traces/import", json={"format": "stash", "data": orjson.dumps(trace).decode()}
            )
            if response.status_code != 200:
                self.failures += 1
            self.timings.append((time.perf_counter(), time.perf_counter() - started))
            time.sleep(0.05)

    def between(self, start: float, end: float) -> list[float]:
        """The seconds of the imports that ended in the window."""
        return [seconds for ended, seconds in self.timings if start <= ended <= end]


def latency(seconds: list[float]) -> str:
    """Median and 95th percentile in milliseconds, with the count."""
    if len(seconds) < 2:
        return f"{len(seconds)} requests"
    p95 = statistics.quantiles(seconds, n=20)[-1]
    return f"median {statistics.median(seconds) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms ({len(seconds)} requests)"


# --- the run -----------------------------------------------------------------------------------


@dataclass
class Row:
    """One case: its answers, the slowest request, the peaks, and the load after it."""

    name: str
    answers: str
    slowest_s: float
    gateway_mb: float
    ingest_mb: float
    load: str


class Bench:
    """One stack, an attacker and a bystander, and a row per case."""

    def __init__(self, stack: RunningStack, concurrency: int) -> None:
        self.stack = stack
        self.concurrency = concurrency
        attacker = stack.create_user("attacker")
        self.clients = [self._client(attacker) for _ in range(concurrency)]
        self.bystander = Bystander(self._client(stack.create_user("bystander")))
        self.rows: list[Row] = []

    def _client(self, key: str) -> httpx.Client:
        return httpx.Client(base_url=self.stack.gateway_url, headers={"Authorization": f"Bearer {key}"}, timeout=900)

    def case(self, name: str, send: Send) -> None:
        """Send `concurrency` copies of one request at once; record answers, the slowest and the peaks."""
        pids = {service: self.stack.pid(service) for service in SERVICES}
        for pid in pids.values():
            reset_peak(pid)
        with ThreadPoolExecutor(self.concurrency) as pool:
            results = list(pool.map(lambda client: _timed(send, client), self.clients))
        answers = Counter(f"{response.status_code} {_reason(response)}" for response, _ in results)
        text = "; ".join(f"{count}× {answer}" for answer, count in sorted(answers.items()))
        peaks = [peak_rss_mb(pids[service]) for service in SERVICES]
        self.rows.append(Row(name, text, max(seconds for _, seconds in results), *peaks, load()))


def _timed(send: Send, client: httpx.Client) -> tuple[httpx.Response, float]:
    started = time.perf_counter()
    response = send(client)
    return response, time.perf_counter() - started


def _reason(response: httpx.Response) -> str:
    if response.status_code < 400:
        return ""
    if response.headers.get("content-type", "").startswith("application/x-protobuf"):  # OTLP's google.rpc.Status
        return status_pb2.Status.FromString(response.content).message[:70]
    try:
        body: Any = response.json()
        detail = body.get("detail") or body.get("message", "")
    except ValueError:
        detail = response.text
    return str(detail)[:70]


def run(bench: Bench, quiet_s: float, formats: set[str]) -> tuple[list[float], list[float]]:
    """The bystander's latencies on the quiet stack, then during every case."""
    worker = threading.Thread(target=bench.bystander.run, daemon=True)
    worker.start()
    time.sleep(quiet_s)
    attack_start = time.perf_counter()
    for name, send in hostile_cases(formats):
        bench.case(name, send)
    attack_end = time.perf_counter()
    bench.bystander.stop.set()
    worker.join()
    return bench.bystander.between(0, attack_start), bench.bystander.between(attack_start, attack_end)


def largest_trace() -> bytes:
    """One trace at the steps-per-trace limit, its text filling the per-trace byte limit."""
    steps = DEFAULT_LIMITS.steps_per_trace
    chars = DEFAULT_LIMITS.trace_bytes // steps - 64  # headroom for each step's `{}` metadata
    body = [{"role": "user" if n % 2 == 0 else "assistant", "content": f"{n} " + "y" * chars} for n in range(steps)]
    return orjson.dumps({"id": "largest", "steps": body})


def reads(bench: Bench, count: int) -> list[tuple[str, float]]:
    """Import the largest trace, then the median seconds of reading it whole and one 1,000-step page."""
    client = bench.clients[0]
    imported = sender("stash", import_body("stash", largest_trace()))(client)
    imported.raise_for_status()
    path = f"/api/v1/rm/traces/{imported.json()['trace_ids'][0]}"
    return [
        (
            f"GET /traces/{{id}}, largest trace, all {DEFAULT_LIMITS.steps_per_trace:,} steps",
            _median(client, path, count),
        ),
        (
            "GET /traces/{id}, largest trace, 1,000 steps (steps_limit)",
            _median(client, f"{path}?steps_offset=5000&steps_limit=1000", count),
        ),
    ]


def _median(client: httpx.Client, path: str, count: int) -> float:
    timings = []
    for _ in range(count):
        started = time.perf_counter()
        client.get(path).raise_for_status()
        timings.append(time.perf_counter() - started)
    return statistics.median(timings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=int, default=3, help="copies of each hostile request sent at once")
    parser.add_argument("--quiet-s", type=float, default=10.0, help="seconds the bystander runs before the attack")
    parser.add_argument("--reads", type=int, default=5, help="reads of the largest trace, each way")
    parser.add_argument("--formats", default=",".join(LONG_TRACE), help="the formats of the over-limit cases")
    args = parser.parse_args()
    started_load = load()
    with tempfile.TemporaryDirectory(prefix="stash-hostile-") as data_dir, running_stack(Path(data_dir)) as stack:
        bench = Bench(stack, args.concurrency)
        quiet, attacked = run(bench, args.quiet_s, set(args.formats.split(",")))
        timed_reads = reads(bench, args.reads)
    title = f"Hostile input, {args.concurrency} at once from one key ({started_load} at the start)"
    table = Table("case", "answers", "slowest s", "gateway peak MiB", "ingest peak MiB", "load after", title=title)
    for row in bench.rows:
        table.add_row(
            row.name, row.answers, f"{row.slowest_s:.2f}", f"{row.gateway_mb:.0f}", f"{row.ingest_mb:.0f}", row.load
        )
    for name, seconds in timed_reads:
        table.add_row(name, f"{args.reads} reads", f"median {seconds:.3f}", "", "", "")
    console = Console(width=200)
    console.print(table)
    console.print(f"Another user's imports, quiet:          {latency(quiet)}")
    console.print(f"Another user's imports, under attack:   {latency(attacked)}")
    console.print(f"Another user's failed imports: {bench.bystander.failures}; {load()} at the end")


if __name__ == "__main__":
    main()
