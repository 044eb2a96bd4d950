"""Import throughput: a 100k-step canonical JSONL through REST into PostgreSQL.

Prints a table with the time split between parsing, validating and writing (each phase run
on its own in this process against the same PostgreSQL), and the end-to-end figure through
the real gateway and ingest processes (`stash-rm up`).

    .venv/bin/python bench/import_throughput.py [--steps 100000] [--steps-per-trace 100]

Needs PostgreSQL on 127.0.0.1:5432 (database `test`, trust auth), like the tests.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import psycopg
from rich.console import Console
from rich.table import Table

from stash_common.db import make_engine, make_sessions, transaction, upgrade
from stash_ingest.adapters.stash import parse_stash
from stash_ingest.imports import ImportRequest, upsert_traces
from stash_ingest.store import MIGRATIONS_DIR
from stash_ingest.titles import derive_title
from stash_ingest.traces import validate_trace

ADMIN_URL = os.environ.get("STASH_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


def make_payload(steps: int, per_trace: int) -> bytes:
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
        lines.append(orjson.dumps({"id": f"bench-{trace_number}", "steps": trace_steps[:per_trace]}))
    return b"\n".join(lines)


def timed(action: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = action()
    return time.perf_counter() - started, result


def fresh_database() -> str:
    name = f"stash_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    return f"{ADMIN_URL.rsplit('/', 1)[0]}/{name}"


def drop_database(url: str) -> None:
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)')


def phases(payload: bytes) -> dict[str, float]:
    """Parse, validate and write measured one after the other, in this process."""
    parse_s, traces = timed(lambda: parse_stash(payload))
    validate_s, _ = timed(lambda: [validate_trace(trace, f"trace {i}") for i, trace in enumerate(traces)])
    url = fresh_database()
    try:
        upgrade("ingest", MIGRATIONS_DIR, url)
        sessions = make_sessions(make_engine(url))
        request = ImportRequest("bench-owner", "stash", payload)

        def write() -> None:
            with transaction(sessions) as session:
                upsert_traces(session, request, "stash", traces, derive_title)

        write_s, _ = timed(write)
    finally:
        drop_database(url)
    return {"parse": parse_s, "validate": validate_s, "write (PostgreSQL)": write_s}


def end_to_end(payload: bytes) -> float:
    """POST /traces/import through `stash-rm up` (gateway + ingest on PostgreSQL)."""
    url = fresh_database()
    data_dir = Path(tempfile.mkdtemp(prefix="stash-bench-"))
    env = {
        **os.environ,
        "STASH_DATA_DIR": str(data_dir),
        "STASH_INGEST_DATABASE_URL": url,
        "STASH_GATEWAY_DATABASE_URL": url,
        "STASH_GATEWAY_PORT": "18471",
    }
    for offset, name in enumerate(("ingest", "labeler", "trainer", "scorer", "gepa")):
        env[f"STASH_{name.upper()}_PORT"] = str(18472 + offset)
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
        key = created.stdout.split("shown once): ")[1].split()[0]
        body = {"format": "stash", "data": payload.decode()}
        seconds, response = timed(
            lambda: httpx.post(
                "http://127.0.0.1:18471/api/v1/rm/traces/import",
                json=body,
                headers={"Authorization": f"Bearer {key}"},
                timeout=900,
            )
        )
        response.raise_for_status()
        return seconds
    finally:
        stack.send_signal(signal.SIGINT)
        stack.wait(timeout=60)
        drop_database(url)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--steps-per-trace", type=int, default=100)
    args = parser.parse_args()
    payload = make_payload(args.steps, args.steps_per_trace)
    table = Table("phase", "seconds", "steps/s", title=f"Import of {args.steps:,} steps ({len(payload) / 1e6:.1f} MB)")
    for phase, seconds in phases(payload).items():
        table.add_row(phase, f"{seconds:.2f}", f"{args.steps / seconds:,.0f}")
    total = end_to_end(payload)
    table.add_row("end to end: REST → gateway → ingest → PostgreSQL", f"{total:.2f}", f"{args.steps / total:,.0f}")
    Console().print(table)


if __name__ == "__main__":
    main()
