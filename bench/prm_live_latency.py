"""End-to-end latency of the live trajectory endpoint: POST /trajectories/{task_id}/events.

A real `stash-rm up` (gateway + labeler processes, PostgreSQL) and one agent-like client that
sends one event per request for several tasks, the way an agent reports each tool call before its
next prompt. Each request appends the event, analyses the task's newest 50 events with the five
detectors, checks the correction ledger and answers. Prints latency percentiles per concurrency.

    .venv/bin/python bench/prm_live_latency.py [--requests 2000] [--tasks 20] [--concurrency 1 4]

Needs PostgreSQL on 127.0.0.1:5432 (database `test`, trust auth), like the tests.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).parent))

from otlp_load import database, stash_stack  # noqa: E402

VERBS = ("read", "edit", "test", "search", "run")
FILES = [f"src/module_{n}.py" for n in range(8)]


def random_event(rng: random.Random) -> dict[str, object]:
    """One agent action with realistic failure odds."""
    verb = rng.choice(VERBS)
    return {
        "action": verb,
        "target_files": rng.sample(FILES, rng.randint(1, 2)),
        "success": rng.random() > (0.5 if verb == "test" else 0.1),
        "duration_s": round(rng.uniform(0.1, 5.0), 2),
    }


def run(url: str, key: str, requests: int, tasks: int, concurrency: int, seed: int) -> tuple[list[float], int]:
    """Latencies in ms, and how many responses carried a course correction."""
    rng = random.Random(seed)
    work = [(f"bench-{seed}-{concurrency}-{n % tasks}", random_event(rng)) for n in range(requests)]
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=f"{url}/api/v1/rm", headers=headers, timeout=30) as client:

        def send(item: tuple[str, dict[str, object]]) -> tuple[float, bool]:
            task_id, event = item
            started = time.perf_counter()
            response = client.post(f"/trajectories/{task_id}/events", json={"events": [event]})
            response.raise_for_status()
            return (time.perf_counter() - started) * 1000, response.json()["course_correction"] is not None

        with ThreadPoolExecutor(concurrency) as pool:
            results = list(pool.map(send, work))
    return [ms for ms, _ in results], sum(corrected for _, corrected in results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    args = parser.parse_args()
    table = Table("senders", "requests", "p50 ms", "p95 ms", "p99 ms", "requests/s", "corrections", title="Live PRM")
    with database() as url, stash_stack(url) as stack:
        for concurrency in args.concurrency:
            started = time.perf_counter()
            latencies, corrected = run(stack.gateway_url, stack.key, args.requests, args.tasks, concurrency, 7)
            seconds = time.perf_counter() - started
            cuts = statistics.quantiles(latencies, n=100)
            table.add_row(
                str(concurrency),
                str(len(latencies)),
                f"{cuts[49]:.1f}",
                f"{cuts[94]:.1f}",
                f"{cuts[98]:.1f}",
                f"{len(latencies) / seconds:.0f}",
                str(corrected),
            )
    Console().print(table)


if __name__ == "__main__":
    main()
