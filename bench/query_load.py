"""SQL query load and latency for an owner with 100k steps, cold and warm.

Starts the embedded stack (`stash-rm up`: six processes on SQLite), imports 1,000 traces of 100 steps
through REST, waits until the labeler has evaluated every one, writes a learned score for every assistant
step straight into the scorer's tables (what published runs leave there) and annotates 500 steps. Then:

- per service: one `StreamOwnerRows` stream of the owner's tables, decoded in this process;
- cold: a new QueryEngine (empty cache) in this process loads all three services at once over gRPC and
  answers the query; the first query a new owner, or one whose rows all changed, pays this;
- warm: the same query again on the cached database (three GetOwnerVersion calls, then DuckDB), in this
  process and through the gateway over HTTP.

    .venv/bin/python bench/query_load.py [--traces 1000] [--steps-per-trace 100] [--warm 200]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from import_throughput import make_payload
from prometheus_client import CollectorRegistry
from rich.console import Console
from rich.table import Table
from sqlalchemy import select

from stash_common.db import make_engine, make_sessions, new_id, transaction, utc_now
from stash_common.logs import configure_logging
from stash_common.settings import load
from stash_gateway.peers import Peers
from stash_gateway.query.engine import QueryEngine
from stash_gateway.query.loading import SOURCES, load_tables, owner_version
from stash_gateway.settings import GatewaySettings
from stash_ingest.store import StepRow, TraceRow
from stash_scorer.store import ActionScoreRow, TraceScoreRow, touch_owner

BASE_PORT = 18571
QUERIES = {
    "aggregate": "SELECT role, count(*)::INTEGER AS steps, avg(length(content)) AS chars FROM steps GROUP BY role",
    "3-way join": (
        "SELECT l.type, count(*)::INTEGER AS actions, avg(a.credit) AS credit, count(an.id)::INTEGER AS rated"
        " FROM action_scores a JOIN step_labels l ON l.step_id = a.step_id"
        " LEFT JOIN annotations an ON an.step_id = a.step_id GROUP BY l.type"
    ),
}


def timed(action: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = action()
    return time.perf_counter() - started, result


@contextmanager
def stack(data_dir: Path) -> Iterator[dict[str, str]]:
    """`stash-rm up` in `data_dir` until Ctrl-C; yields its environment."""
    env = {**os.environ, "STASH_DATA_DIR": str(data_dir), "STASH_GATEWAY_PORT": str(BASE_PORT)}
    env["STASH_GATEWAY_OTLP_GRPC_PORT"] = str(BASE_PORT + 10)
    for offset, name in enumerate(("ingest", "labeler", "trainer", "scorer", "gepa"), start=1):
        env[f"STASH_{name.upper()}_PORT"] = str(BASE_PORT + offset)
        env[f"STASH_{name.upper()}_ADDRESS"] = f"127.0.0.1:{BASE_PORT + offset}"
    process = subprocess.Popen([sys.executable, "-m", "stash_cli", "up"], env=env, stdout=subprocess.PIPE, text=True)
    try:
        while "Gateway:" not in (process.stdout.readline() if process.stdout else ""):
            if process.poll() is not None:
                raise RuntimeError("stash-rm up exited")
        yield env
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)


def new_user(env: dict[str, str]) -> tuple[str, str]:
    """(user id, key) of a new user, through the CLI."""
    created = subprocess.run(
        [sys.executable, "-m", "stash_cli", "users", "create", "bench"], env=env, capture_output=True, text=True
    )
    created.check_returncode()
    user_id = created.stdout.split("(", 1)[1].split(")", 1)[0]
    return user_id, created.stdout.split("shown once): ")[1].split()[0]


def populate(api: httpx.Client, data_dir: Path, owner_id: str, traces: int, per_trace: int) -> dict[str, float]:
    """Import, wait for every evaluation, score every assistant step, annotate; seconds per phase."""
    seconds: dict[str, float] = {}
    payload = make_payload(traces * per_trace, per_trace).decode()
    seconds["import (REST)"], response = timed(
        lambda: api.post("/traces/import", json={"format": "stash", "data": payload})
    )
    response.raise_for_status()
    seconds["labeler evaluates every trace"], _ = timed(lambda: _evaluated(api, traces))
    seconds["scores written (direct)"], steps = timed(lambda: _scored(data_dir, owner_id))
    seconds["500 annotations (REST)"], _ = timed(lambda: _annotated(api, steps[:500]))
    return seconds


def _evaluated(api: httpx.Client, traces: int) -> None:
    sql = {"sql": "SELECT count(DISTINCT trace_id)::INTEGER FROM evaluations WHERE status = 'succeeded'"}
    while api.post("/query", json=sql).json()["rows"] != [[traces]]:
        time.sleep(2)


def _scored(data_dir: Path, owner_id: str) -> list[tuple[str, str]]:
    """One learned score per assistant step and one per trace, as a published run leaves them."""
    ingest = make_sessions(make_engine(f"sqlite:///{data_dir / 'ingest.db'}"))
    with transaction(ingest) as session:
        query = select(StepRow.trace_id, StepRow.id, StepRow.position).join(TraceRow).where(StepRow.role == "assistant")
        steps = list(session.execute(query))
    scorer = make_sessions(make_engine(f"sqlite:///{data_dir / 'scorer.db'}"))
    common = {"reward_model_id": new_id(), "owner_id": owner_id, "reward_model_name": "bench", "trace_revision": 1}
    with transaction(scorer) as session:
        for trace_id in {trace_id for trace_id, _, _ in steps}:
            session.add(
                TraceScoreRow(**common, trace_id=trace_id, score=1.0, scoring_run_id=new_id(), created_at=utc_now())
            )
        for number, (trace_id, step_id, position) in enumerate(steps):
            session.add(
                ActionScoreRow(
                    **common,
                    trace_id=trace_id,
                    step_id=step_id,
                    step_index=position,
                    score=(number % 7) / 7,
                    credit=(number % 7) / 7 - 0.5,
                    scoring_run_id=new_id(),
                    created_at=utc_now(),
                )
            )
        touch_owner(session, owner_id)
    return [(trace_id, step_id) for trace_id, step_id, _ in steps]


def _annotated(api: httpx.Client, steps: list[tuple[str, str]]) -> None:
    for number, (trace_id, step_id) in enumerate(steps):
        body = {"step_id": step_id, "rating": 1 if number % 3 else -1}
        api.post(f"/traces/{trace_id}/annotations", json=body).raise_for_status()


def percentiles(samples: list[float]) -> tuple[float, float]:
    """(p50, p99) in milliseconds."""
    ordered = sorted(samples)
    return statistics.median(ordered) * 1000, ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=1000)
    parser.add_argument("--steps-per-trace", type=int, default=100)
    parser.add_argument("--cold", type=int, default=5, help="cold loads to time")
    parser.add_argument("--warm", type=int, default=200, help="warm queries to time, per query and path")
    args = parser.parse_args()
    configure_logging("bench", "WARNING")
    console = Console()
    data_dir = Path(tempfile.mkdtemp(prefix="stash-query-bench-"))
    with stack(data_dir) as env:
        owner_id, key = new_user(env)
        gateway = f"http://127.0.0.1:{BASE_PORT}/api/v1/rm"
        with httpx.Client(base_url=gateway, headers={"Authorization": f"Bearer {key}"}, timeout=900) as api:
            setup = populate(api, data_dir, owner_id, args.traces, args.steps_per_trace)
            settings = load(
                GatewaySettings, **{f"{name}_address": env[f"STASH_{name.upper()}_ADDRESS"] for name in SOURCES}
            )
            peers = Peers(settings)
            console.print(setup_table(setup, args.traces * args.steps_per_trace))
            console.print(source_table(peers, owner_id, settings))
            console.print(latency_table(peers, settings, api, owner_id, args.cold, args.warm))
            peers.close()
    console.print(f"[dim]data in {data_dir}; {os.cpu_count()} CPUs (shared with other work)[/dim]")


def setup_table(setup: dict[str, float], steps: int) -> Table:
    table = Table("setup phase", "seconds", title=f"An owner with {steps:,} steps (embedded profile, SQLite)")
    for phase, seconds in setup.items():
        table.add_row(phase, f"{seconds:.1f}")
    return table


def source_table(peers: Peers, owner_id: str, settings: GatewaySettings) -> Table:
    """One StreamOwnerRows stream per service, decoded here (median of three)."""
    table = Table(
        "service",
        "tables",
        "rows",
        "Arrow MB",
        "stream + decode (s)",
        "GetOwnerVersion (ms)",
        title="Load cost per service",
    )
    for source in SOURCES:
        runs = [
            timed(lambda source=source: load_tables(peers, source, owner_id, settings.query_load_timeout_s))
            for _ in range(3)
        ]
        loaded = runs[0][1]
        megabytes = sum(part.nbytes for part in loaded.tables.values()) / 1e6
        median = statistics.median(seconds for seconds, _ in runs)
        marker = statistics.median(
            timed(lambda source=source: owner_version(peers, source, owner_id, 10))[0] for _ in range(20)
        )
        table.add_row(
            source,
            ", ".join(loaded.tables),
            f"{loaded.rows:,}",
            f"{megabytes:.1f}",
            f"{median:.2f}",
            f"{marker * 1000:.1f}",
        )
    return table


def latency_table(
    peers: Peers, settings: GatewaySettings, api: httpx.Client, owner_id: str, cold_runs: int, warm_runs: int
) -> Table:
    table = Table("query", "path", "runs", "p50 ms", "p99 ms", title="Cold load and query latency")
    for name, sql in QUERIES.items():
        cold = []
        for _ in range(cold_runs):
            engine = QueryEngine(peers, settings, CollectorRegistry())
            cold.append(timed(lambda engine=engine, sql=sql: engine.run(owner_id, sql))[0])
            engine.close()
        table.add_row(
            name, "cold: load all 8 tables + query", str(cold_runs), *(f"{ms:,.0f}" for ms in percentiles(cold))
        )
        engine = QueryEngine(peers, settings, CollectorRegistry())
        engine.run(owner_id, sql)
        warm = [timed(lambda engine=engine, sql=sql: engine.run(owner_id, sql))[0] for _ in range(warm_runs)]
        engine.close()
        table.add_row(name, "warm, in process", str(warm_runs), *(f"{ms:,.1f}" for ms in percentiles(warm)))
        api.post("/query", json={"sql": sql}).raise_for_status()
        over_http = [
            timed(lambda sql=sql: api.post("/query", json={"sql": sql}).raise_for_status())[0] for _ in range(warm_runs)
        ]
        table.add_row(
            name, "warm, REST through the gateway", str(warm_runs), *(f"{ms:,.1f}" for ms in percentiles(over_http))
        )
    return table


if __name__ == "__main__":
    main()
