"""OTLP/HTTP load: Stash RM's receiver side by side with Arize Phoenix, fed the same spans.

Every run is driven by the shared workload `bench/anchors/phoenix_otlp.py`: realistic
OpenInference agent traces (AGENT root, LLM child with ~3 KB of messages, TOOL child),
512 spans per OTLP/HTTP protobuf request, sent for N seconds, then persisted spans are counted
until the count has not grown for `--settle` seconds (both systems alike). Rows:

- `stash-rm`: `stash-rm up` on PostgreSQL; persisted = raw spans stored, plus the traces
  rebuilt from them (every touched trace is rebuilt on each request).
- `stash-rm SIGTERM`: the same load, with the gateway sent SIGTERM mid-load; it drains
  in-flight requests and exits, and `lost` counts accepted spans that were not stored.
- `phoenix sqlite` / `phoenix postgres`: Phoenix's OTLP receiver (only with --phoenix-python,
  a Python that has `arize-phoenix` and `asyncpg` installed: `python3 -m venv .phoenix &&
  .phoenix/bin/pip install arize-phoenix asyncpg`).

    .venv/bin/python bench/otlp_load.py [--seconds 30] [--concurrency 2] [--phoenix-python .phoenix/bin/python]

"persisted spans/s" is the persisted count over the time until the last one was persisted. A system that
acknowledges spans before storing them keeps persisting after the load stops: its rate is then the
drain rate (spans persisted after the load ended over the time they took), marked "(drain)", since the
overall figure would credit it with the seconds of load during which it stored little. "server CPU
ms/span" is the CPU time of the system's own processes (Stash RM's six services; Phoenix's server; not
PostgreSQL's) over the run, per persisted span. The machine's load is printed with the table.

Needs PostgreSQL on 127.0.0.1:5432 (database `test`, trust auth) and `psql`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
ANCHOR = REPO / "bench" / "anchors" / "phoenix_otlp.py"
ADMIN_URL = os.environ.get("STASH_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
COLUMNS = [
    ("label", "run"),
    ("accepted_spans_per_s", "accepted spans/s"),
    ("p50_ms", "p50 ms"),
    ("p99_ms", "p99 ms"),
    ("persisted", "persisted"),
    ("persisted_at_send_end", "persisted at load end"),
    ("rate", "persisted spans/s"),
    ("lost", "lost"),
    ("retryable_503s", "503s"),
    ("traces", "traces rebuilt"),
    ("server_cpu_ms_per_persisted_span", "server CPU ms/span"),
]


@contextmanager
def database() -> Iterator[str]:
    """A fresh PostgreSQL database, dropped afterwards."""
    name = f"stash_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = f"{ADMIN_URL.rsplit('/', 1)[0]}/{name}"
    try:
        yield url
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class StashStack:
    """A running `stash-rm up` with one user."""

    process: subprocess.Popen[str]
    data_dir: Path
    gateway_url: str
    key: str
    owner_id: str
    database_url: str

    def pids(self) -> list[int]:
        return [int(path.read_text()) for path in (self.data_dir / "run").glob("*.pid")]

    def count_sql(self, table: str) -> str:
        return f"select count(*) from {table} where owner_id = '{self.owner_id}'"


@contextmanager
def stash_stack(database_url: str) -> Iterator[StashStack]:
    data_dir = Path(tempfile.mkdtemp(prefix="stash-otlp-bench-"))
    env = {
        **os.environ,
        "STASH_DATA_DIR": str(data_dir),
        "STASH_INGEST_DATABASE_URL": database_url,
        "STASH_GATEWAY_DATABASE_URL": database_url,
        "STASH_LABELER_DATABASE_URL": database_url,
        "STASH_GATEWAY_PORT": str(free_port()),
        "STASH_GATEWAY_OTLP_GRPC_PORT": str(free_port()),
        "STASH_LOG_LEVEL": "WARNING",
    }
    for name in ("ingest", "labeler", "trainer", "scorer", "gepa"):
        port = free_port()
        env[f"STASH_{name.upper()}_PORT"], env[f"STASH_{name.upper()}_ADDRESS"] = str(port), f"127.0.0.1:{port}"
    process = subprocess.Popen([sys.executable, "-m", "stash_cli", "up"], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        while "Gateway:" not in process.stdout.readline():
            if process.poll() is not None:
                raise RuntimeError("stash-rm up exited before serving")
        threading.Thread(target=process.stdout.read, daemon=True).start()
        created = subprocess.run(
            [sys.executable, "-m", "stash_cli", "users", "create", f"bench-{uuid.uuid4().hex[:6]}"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        key = created.stdout.split("shown once): ")[1].split()[0]
        url = f"http://127.0.0.1:{env['STASH_GATEWAY_PORT']}"
        owner = httpx.get(f"{url}/api/v1/rm/me", headers={"Authorization": f"Bearer {key}"}).json()["user_id"]
        yield StashStack(process, data_dir, url, key, owner, database_url)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            process.wait(timeout=120)


def run_anchor(url: str, label: str, args: argparse.Namespace, extra: list[str]) -> dict:
    """One run of the shared workload; returns its result row."""
    out = Path(tempfile.mkstemp(suffix=".jsonl")[1])
    command = [
        sys.executable,
        str(ANCHOR),
        "--url",
        url,
        "--label",
        label,
        "--seconds",
        str(args.seconds),
        "--concurrency",
        str(args.concurrency),
        "--settle",
        str(args.settle),
        "--drain-timeout",
        str(args.drain_timeout),
        "--json-out",
        str(out),
        *extra,
    ]
    subprocess.run(command, check=True)
    row = json.loads(out.read_text().splitlines()[-1])
    row["rate"] = persisted_rate(row)
    return row


def persisted_rate(row: dict) -> str:
    """The persisted rate, or the drain rate (marked) when persisting went on after the load stopped."""
    persisted, at_end = row.get("persisted"), row.get("persisted_at_send_end")
    if persisted and at_end is not None and persisted > at_end and row.get("drain_spans_per_s") is not None:
        return f"{row['drain_spans_per_s']} (drain)"
    return str(row.get("persisted_spans_per_s"))


def stash_rows(args: argparse.Namespace) -> list[dict]:
    rows = []
    for label, sigterm in (("stash-rm", False), ("stash-rm SIGTERM mid-load", True)):
        with database() as url, stash_stack(url) as stack:
            count = f"psql '{url}' -tAc \"{stack.count_sql('otel_spans')}\""
            extra = ["--header", f"Authorization=Bearer {stack.key}", "--count-cmd", count]
            extra += [arg for pid in stack.pids() for arg in ("--server-pid", str(pid))]
            if sigterm:
                gateway = int((stack.data_dir / "run" / "gateway.pid").read_text())
                threading.Timer(args.seconds / 2, os.kill, (gateway, signal.SIGTERM)).start()
            row = run_anchor(f"{stack.gateway_url}/api/v1/rm/otel/v1/traces", label, args, extra)
            with psycopg.connect(url) as connection:
                row["traces"] = connection.execute(stack.count_sql("traces")).fetchone()[0]
            rows.append(row)
    return rows


def phoenix_rows(args: argparse.Namespace) -> list[dict]:
    rows = []
    for backend in ("sqlite", "postgres"):
        with database() as url, phoenix(args.phoenix_python, url if backend == "postgres" else None) as server:
            port, db, pid = server
            count = ["--count-pg", url] if backend == "postgres" else ["--count-sqlite", str(db)]
            extra = [*count, "--server-pid", str(pid)]
            rows.append(run_anchor(f"http://127.0.0.1:{port}/v1/traces", f"phoenix {backend}", args, extra))
    return rows


@contextmanager
def phoenix(python: str, postgres_url: str | None) -> Iterator[tuple[int, Path, int]]:
    """`phoenix serve` on free ports, on SQLite (a fresh working dir) or on PostgreSQL: its port, its SQLite
    file and its process id."""
    work = Path(tempfile.mkdtemp(prefix="phoenix-bench-"))
    port = free_port()
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(work),
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(free_port()),
    }
    if postgres_url:
        env["PHOENIX_SQL_DATABASE_URL"] = postgres_url
    process = subprocess.Popen(
        [python, "-m", "phoenix.server.main", "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 180
        while not _answers_ok(f"http://127.0.0.1:{port}/healthz"):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"phoenix did not start (exit code {process.poll()}); is asyncpg installed for PG?")
            time.sleep(0.5)
        yield port, work / "phoenix.db", process.pid
    finally:
        process.terminate()
        process.wait(timeout=60)


def _answers_ok(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.TransportError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--drain-timeout", type=float, default=180)
    parser.add_argument(
        "--settle", type=float, default=30, help="stop counting once persisted spans are flat this long"
    )
    parser.add_argument("--phoenix-python", help="a Python with arize-phoenix installed; omit to skip Phoenix")
    parser.add_argument("--skip-stash", action="store_true", help="run only the Phoenix rows")
    args = parser.parse_args()
    rows = ([] if args.skip_stash else stash_rows(args)) + (phoenix_rows(args) if args.phoenix_python else [])
    heading = (
        f"OTLP/HTTP protobuf, 512 spans/request, {args.seconds:.0f}s, {args.concurrency} senders, settle"
        f" {args.settle:.0f}s; load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    table = Table(*(title for _, title in COLUMNS), title=heading)
    for row in rows:
        table.add_row(*(str(row.get(key, "")) for key, _ in COLUMNS))
    Console(width=200).print(table)  # eleven columns: a log's 80 would cut every one of them short


if __name__ == "__main__":
    main()
