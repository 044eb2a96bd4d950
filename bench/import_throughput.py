"""Import throughput: a 100k-step canonical JSONL through REST into PostgreSQL, beside raw COPY of the same rows.

Prints, in one run on one machine:
- the anchor: PostgreSQL's COPY of exactly the rows an import stores (the trace rows and the step rows,
  JSON already encoded) into ingest's tables in a fresh database, one transaction, the median of `--tries`;
- ingest's phases on their own in this process: parse (with validation and the limits), then the write;
- end to end through the real gateway and ingest processes (`stash-rm up`, PostgreSQL): `--requests`
  imports of the payload after a warm-up one, each with its own trace ids (so each creates every trace),
  one after the other; the median, and its ratio to the anchor. Before each request the stack is let go
  quiet (its processes' CPU time flat for a second), so the labeler's work on the previous import's
  traces does not land in the next import's time.
The machine's load is printed with the table.

    .venv/bin/python bench/import_throughput.py [--steps 100000] [--steps-per-trace 100] [--requests 5]

Needs PostgreSQL on 127.0.0.1:5432 (database `test`, trust auth), like the tests.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import orjson
import psycopg
from rich.console import Console
from rich.table import Table

from stash_common.db import make_engine, make_sessions, new_id, transaction, upgrade
from stash_ingest.adapters.stash import parse_stash
from stash_ingest.imports import ImportRequest, upsert_traces
from stash_ingest.store import MIGRATIONS_DIR
from stash_ingest.titles import derive_title
from stash_ingest.traces import Trace

ADMIN_URL = os.environ.get("STASH_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


def make_payload(steps: int, per_trace: int, prefix: str = "bench") -> bytes:
    """Realistic support conversations: user asks, assistant calls a tool, tool answers, assistant replies."""
    lines = []
    for trace_number in range(steps // per_trace):
        trace_steps: list[dict[str, Any]] = [{"role": "system", "content": "You are a support agent."}]
        while len(trace_steps) < per_trace:
            n = len(trace_steps)
            trace_steps += [
                {"role": "user", "content": f"Where is order {trace_number}-{n}? It should have arrived by now."},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_name": "lookup_order",
                    "tool_input": {"order_id": f"{trace_number}-{n}"},
                    "tool_call_id": f"call_{n}",
                },
                {
                    "role": "tool",
                    "content": '{"status": "in transit", "eta": "2026-12-02"}',
                    "tool_call_id": f"call_{n}",
                },
                {"role": "assistant", "content": "Your order is in transit and should arrive on 2 December."},
            ]
        lines.append(orjson.dumps({"id": f"{prefix}-{trace_number}", "steps": trace_steps[:per_trace]}))
    return b"\n".join(lines)


def timed(action: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = action()
    return time.perf_counter() - started, result


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"


@contextmanager
def fresh_database() -> Iterator[str]:
    """A new PostgreSQL database with ingest's tables, dropped afterwards."""
    name = f"stash_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = f"{ADMIN_URL.rsplit('/', 1)[0]}/{name}"
    try:
        upgrade("ingest", MIGRATIONS_DIR, url)
        yield url
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# --- the anchor: COPY of the same rows -----------------------------------------------------------

TRACE_COLUMNS = (
    "id, owner_id, external_id, title, source_format, source_id, explicit_source_id, metadata, revision, "
    "step_count, created_at, updated_at"
)
STEP_COLUMNS = "id, trace_id, position, role, content, tool_name, tool_input, tool_call_id, metadata"


def copy_rows(traces: list[Trace]) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The trace rows and step rows an import of `traces` stores, as COPY writes them (JSON as text)."""
    now = datetime.now(UTC)
    trace_rows, step_rows = [], []
    for trace in traces:
        trace_id = new_id()
        trace_rows.append(
            (
                trace_id,
                "owner",
                trace.external_id,
                derive_title(trace),
                "stash",
                "stash",
                False,
                "{}",
                1,
                len(trace.steps),
                now,
                now,
            )  # fmt: skip
        )
        for position, step in enumerate(trace.steps):
            tool_input = None if step.tool_input is None else orjson.dumps(dict(step.tool_input)).decode()
            metadata = orjson.dumps(dict(step.metadata)).decode()
            step_rows.append(
                (
                    new_id(),
                    trace_id,
                    position,
                    step.role,
                    step.content,
                    step.tool_name,
                    tool_input,
                    step.tool_call_id,
                    metadata,
                )  # fmt: skip
            )
    return trace_rows, step_rows


def copy_anchor(traces: list[Trace], tries: int) -> float:
    """The median seconds of COPYing the rows of `traces` into ingest's tables in one transaction."""
    timings = []
    for _ in range(tries):
        trace_rows, step_rows = copy_rows(traces)
        with fresh_database() as url, psycopg.connect(url) as connection:
            started = time.perf_counter()
            _copy(connection, trace_rows, step_rows)
            timings.append(time.perf_counter() - started)
    return statistics.median(timings)


def _copy(
    connection: psycopg.Connection[Any], trace_rows: list[tuple[Any, ...]], step_rows: list[tuple[Any, ...]]
) -> None:
    with connection.transaction(), connection.cursor() as cursor:
        with cursor.copy(f"COPY traces ({TRACE_COLUMNS}) FROM STDIN") as copy:
            for row in trace_rows:
                copy.write_row(row)
        with cursor.copy(f"COPY steps ({STEP_COLUMNS}) FROM STDIN") as copy:
            for row in step_rows:
                copy.write_row(row)


# --- ingest's phases on their own ----------------------------------------------------------------


def phases(payload: bytes) -> dict[str, float]:
    """Parse (with validation and limits) and write, measured one after the other in this process."""
    parse_s, traces = timed(lambda: parse_stash(payload))
    with fresh_database() as url:
        sessions = make_sessions(make_engine(url))
        request = ImportRequest("bench-owner", "stash", payload)

        def write() -> None:
            with transaction(sessions) as session:
                upsert_traces(session, request, "stash", traces, derive_title)

        write_s, _ = timed(write)
    return {"parse, validate and check limits": parse_s, "write (PostgreSQL)": write_s}


# --- end to end ----------------------------------------------------------------------------------


def end_to_end(args: argparse.Namespace) -> list[float]:
    """Seconds of each of `requests` POST /traces/import through `stash-rm up` on PostgreSQL, after a warm-up."""
    bodies = [
        orjson.dumps({"format": "stash", "data": make_payload(args.steps, args.steps_per_trace, f"r{n}").decode()})
        for n in range(args.requests + 1)
    ]
    with (
        tempfile.TemporaryDirectory(prefix="stash-bench-") as scratch,
        fresh_database() as url,
        _stack(url, Path(scratch)) as (gateway_url, key),
    ):
        data_dir = Path(scratch)
        client = httpx.Client(
            base_url=f"{gateway_url}/api/v1/rm",
            headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
            timeout=900,
        )
        timings = []
        for body in bodies:
            wait_until_quiet(data_dir)
            started = time.perf_counter()
            client.post("/traces/import", content=body).raise_for_status()
            timings.append(time.perf_counter() - started)
    return timings[1:]  # the first warmed the stack up


def wait_until_quiet(data_dir: Path, most_s: float = 180.0) -> None:
    """Wait until the stack's processes used under 5 % of a core over one second (at most `most_s`)."""
    pids = [int(path.read_text()) for path in (data_dir / "run").glob("*.pid")]
    deadline = time.monotonic() + most_s
    while time.monotonic() < deadline:
        before = _cpu_ticks(pids)
        time.sleep(1.0)
        if _cpu_ticks(pids) - before < 0.05 * os.sysconf("SC_CLK_TCK"):
            return


def _cpu_ticks(pids: list[int]) -> int:
    ticks = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def _stack(database_url: str, data_dir: Path) -> Iterator[tuple[str, str]]:
    """`stash-rm up` on free ports, ingest and the gateway on `database_url`; yields its URL and a new user's key."""
    env = {
        **os.environ,
        "STASH_DATA_DIR": str(data_dir),
        "STASH_INGEST_DATABASE_URL": database_url,
        "STASH_GATEWAY_DATABASE_URL": database_url,
        "STASH_GATEWAY_OTLP_GRPC_PORT": str(_free_port()),
    }
    for name in ("gateway", "ingest", "labeler", "trainer", "scorer", "gepa"):
        env[f"STASH_{name.upper()}_PORT"] = str(_free_port())
    stack = subprocess.Popen([sys.executable, "-m", "stash_cli", "up"], env=env, stdout=subprocess.PIPE, text=True)
    try:
        while "Gateway:" not in (stack.stdout.readline() if stack.stdout else ""):
            if stack.poll() is not None:
                raise RuntimeError("stash-rm up exited")
        created = subprocess.run(
            [sys.executable, "-m", "stash_cli", "users", "create", "bench"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        yield f"http://127.0.0.1:{env['STASH_GATEWAY_PORT']}", created.stdout.split("shown once): ")[1].split()[0]
    finally:
        stack.send_signal(signal.SIGINT)
        stack.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--steps-per-trace", type=int, default=100)
    parser.add_argument("--requests", type=int, default=5, help="timed imports end to end, after a warm-up")
    parser.add_argument("--tries", type=int, default=3, help="COPYs of the anchor")
    args = parser.parse_args()
    payload = make_payload(args.steps, args.steps_per_trace)
    loads = [load()]
    anchor = copy_anchor(parse_stash(payload), args.tries)
    measured = phases(payload)
    loads.append(load())
    e2e = end_to_end(args)
    loads.append(load())
    e2e_s = statistics.median(e2e)
    title = f"Import of {args.steps:,} steps ({len(payload) / 1e6:.1f} MB), {'; '.join(loads)}"
    table = Table("phase", "seconds", "steps/s", "of COPY", title=title)
    table.add_row(
        f"anchor: COPY of the same rows (median of {args.tries})",
        f"{anchor:.2f}",
        f"{args.steps / anchor:,.0f}",
        "1.00",
    )
    for phase, seconds in measured.items():
        table.add_row(phase, f"{seconds:.2f}", f"{args.steps / seconds:,.0f}", f"{anchor / seconds:.2f}")
    table.add_row(
        f"end to end: REST → gateway → ingest → PostgreSQL (median of {len(e2e)})",
        f"{e2e_s:.2f}",
        f"{args.steps / e2e_s:,.0f}",
        f"{anchor / e2e_s:.2f}",
    )
    Console(width=160).print(table)
    print("end-to-end seconds of each request:", ", ".join(f"{seconds:.2f}" for seconds in e2e))


if __name__ == "__main__":
    main()
