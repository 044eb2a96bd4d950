"""Shared evaluator scoring: one release scoring every action of `--traces` imported traces, then steady imports.

Starts `stash-rm up` (embedded profile, SQLite, local scoring workers) on free ports, imports `--traces`
support conversations (5 steps: a tool call and a reply to score, 2 actions each) for one owner, trains a
personal model on the packaged MiniLM from 4 rated traces of a second owner (whose own backfill is those 4
traces), and publishes its training job as shared evaluator release 1 over gRPC, as the trainer does.
Measured:

- the backfill: from the publication until every trace has release 1's scores; actions/s counts the
  actions scored between the first scoring job's start and the last score (the scorer's own timestamps);
  the peak memory is the largest VmHWM of any scoring worker process (sampled from /proc every 0.2 s);
- steady import load: then one trace every `--interval` s for `--steady-s` s; per trace, the time from its
  import request to its release 1 action scores (p50, p95, max). An owner who imports without pause is
  acted on once a change has waited 10 debounces (`--debounce-s`, the scorer's STASH_SCORER_DEBOUNCE_S).

    .venv/bin/python bench/shared_scoring.py [--traces 10000] [--batch-traces 500] [--debounce-s 5]
        [--interval 2] [--steady-s 120]
"""

from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import orjson
from rich.console import Console
from rich.table import Table

sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parents[1] / "tests")]

from import_throughput import make_payload  # noqa: E402
from labeling_fairness import Stack, free_port, import_traces  # noqa: E402

from stash.rm.v1 import scorer_pb2, scorer_pb2_grpc  # noqa: E402
from stash_common.channels import open_channel  # noqa: E402
from stash_common.messages import timestamp_of  # noqa: E402
from support.ingest import stash_line  # noqa: E402

STEPS_PER_TRACE = 5
PER_IMPORT = 2000
WAIT_S = 3600.0
WORKER_MARK = "stash_common.jobs.worker"


@contextmanager
def local_stack(extra: dict[str, str]) -> Iterator[Stack]:
    """`stash-rm up` on free ports with `extra` settings; SIGINT at the end."""
    data_dir = Path(tempfile.mkdtemp(prefix="stash-shared-scoring-bench-"))
    env = {**os.environ, "STASH_DATA_DIR": str(data_dir), "STASH_LOG_LEVEL": "WARNING", **extra}
    for name in ("gateway", "gateway_otlp_grpc", "ingest", "labeler", "trainer", "scorer", "gepa"):
        env[f"STASH_{name.upper()}_PORT"] = str(free_port())
    env["STASH_SCORER_ADDRESS"] = f"127.0.0.1:{env['STASH_SCORER_PORT']}"
    process = subprocess.Popen(
        [sys.executable, "-m", "stash_cli", "up"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        assert process.stdout is not None
        while "Gateway:" not in (line := process.stdout.readline()):
            if not line and process.poll() is not None:
                raise RuntimeError("stash-rm up exited before serving")
        threading.Thread(target=process.stdout.read, daemon=True).start()
        yield Stack(process, data_dir, env, f"http://127.0.0.1:{env['STASH_GATEWAY_PORT']}/api/v1/rm")
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            process.wait(timeout=120)


class WorkerMemory:
    """The largest peak RSS (VmHWM) of any scoring worker process seen while sampling."""

    def __init__(self) -> None:
        self.peak_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> WorkerMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.wait(0.2):
            for proc in Path("/proc").iterdir():
                self.peak_kb = max(self.peak_kb, _worker_hwm_kb(proc))


def _worker_hwm_kb(proc: Path) -> int:
    try:
        cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        if f"{WORKER_MARK} score --job" not in cmdline:  # a worker, not its fork server
            return 0
        for line in (proc / "status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass  # the process ended between listing and reading
    return 0


def query(stack: Stack, database: str, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    """Rows of a read-only query on a service's SQLite file."""
    with sqlite3.connect(f"file:{stack.data_dir / database}?mode=ro", uri=True, timeout=30) as db:
        return list(db.execute(sql, args).fetchall())


def waited(what: str, probe: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if (found := probe()) is not None:
            return found
        time.sleep(0.5)
    raise TimeoutError(f"{what} within {WAIT_S:.0f}s")


def trained_job_key(stack: Stack, client: httpx.Client) -> str:
    """Train a personal model on 4 rated traces of the client's owner; its training job's key."""
    trace_ids = []
    for number in range(4):
        trace = orjson.loads(stash_line(f"rated-{number}"))
        trace["steps"][1]["content"] = f"I want a refund for order {1100 + number}"
        trace_id = import_traces(client, orjson.dumps(trace))[0]
        steps = client.get(f"/traces/{trace_id}").json()["steps"]
        for step, rating in ((steps[2], 1), (steps[4], -1)):
            client.post(f"/traces/{trace_id}/annotations", json={"step_id": step["id"], "rating": rating})
        trace_ids.append(trace_id)
    model_id = client.post("/reward-models", json={"name": "release", "trace_ids": trace_ids}).json()["id"]

    def finished() -> dict[str, Any] | None:
        model = client.get(f"/reward-models/{model_id}").json()
        return model if model["status"] in ("succeeded", "failed") else None

    model = waited("the model did not finish training", finished)
    if model["status"] != "succeeded":
        raise RuntimeError(f"training failed: {model['error']}")
    (job_id,) = query(stack, "trainer.db", "SELECT job_id FROM reward_models WHERE id = ?", model_id)[0]
    return f"jobs/trainer/{job_id}"


def publish(stack: Stack, job_key: str) -> None:
    channel = open_channel(stack.env["STASH_SCORER_ADDRESS"])
    request = scorer_pb2.PublishEvaluatorReleaseRequest(
        number=1, job_key=job_key, released_at=timestamp_of(datetime.now(UTC))
    )
    scorer_pb2_grpc.ScorerServiceStub(channel).PublishEvaluatorRelease(request, timeout=60)
    channel.close()


def scored_traces(stack: Stack) -> int:
    return int(query(stack, "scorer.db", "SELECT count(*) FROM trace_scores WHERE release_number = 1")[0][0])


def backfill(stack: Stack, job_key: str, traces: int) -> dict[str, float]:
    """Publish release 1 and wait until every trace has its scores."""
    with WorkerMemory() as memory:
        started = time.monotonic()
        publish(stack, job_key)
        waited("the release did not score every trace", lambda: True if scored_traces(stack) >= traces else None)
        elapsed = time.monotonic() - started
    first_job, last_score, actions = query(
        stack,
        "scorer.db",
        "SELECT (SELECT min(created_at) FROM scoring_jobs WHERE release_number = 1),"
        " (SELECT max(created_at) FROM action_scores WHERE release_number = 1),"
        " (SELECT count(*) FROM action_scores WHERE release_number = 1)",
    )[0]
    scoring_s = (_parsed(last_score) - _parsed(first_job)).total_seconds()
    return {"elapsed": elapsed, "scoring_s": scoring_s, "actions": actions, "peak_mb": memory.peak_kb / 1024}


def _parsed(stored: str) -> datetime:
    moment = datetime.fromisoformat(stored)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def steady(stack: Stack, client: httpx.Client, interval_s: float, window_s: float) -> list[float]:
    """Import one trace every `interval_s` for `window_s`; seconds from each import to its shared credit."""
    imported: dict[str, float] = {}
    number, started = 0, time.monotonic()
    while time.monotonic() - started < window_s:
        sent = time.time()
        (trace_id,) = import_traces(client, make_payload(STEPS_PER_TRACE, STEPS_PER_TRACE, f"steady-{number}"))
        imported[trace_id] = sent
        number += 1
        time.sleep(max(0.0, interval_s - (time.time() - sent)))

    def credited() -> dict[str, datetime] | None:
        rows = query(
            stack,
            "scorer.db",
            "SELECT trace_id, min(created_at) FROM action_scores WHERE release_number = 1 GROUP BY trace_id",
        )
        found = {trace_id: _parsed(at) for trace_id, at in rows if trace_id in imported}
        return found if len(found) == len(imported) else None

    found = waited("the steady imports were not all scored", credited)
    return sorted(found[trace_id].timestamp() - sent for trace_id, sent in imported.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=10_000, help="traces imported before the release")
    parser.add_argument("--batch-traces", type=int, default=500, help="STASH_SCORER_BATCH_TRACES")
    parser.add_argument("--debounce-s", type=float, default=5.0, help="STASH_SCORER_DEBOUNCE_S")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between steady imports")
    parser.add_argument("--steady-s", type=float, default=120.0, help="how long the steady imports last")
    args = parser.parse_args()
    settings = {
        "STASH_SCORER_BATCH_TRACES": str(args.batch_traces),
        "STASH_SCORER_DEBOUNCE_S": str(args.debounce_s),
        "STASH_TRAINER_DEVICE": "cpu",
        "CUDA_VISIBLE_DEVICES": "",
    }
    with local_stack(settings) as stack, httpx.Client(base_url=stack.url, timeout=600) as anyone:
        owner = httpx.Client(base_url=stack.url, timeout=600, headers=_auth(stack.create_user("owner")))
        trainer = httpx.Client(base_url=stack.url, timeout=600, headers=_auth(stack.create_user("trainer")))
        payload = make_payload(args.traces * STEPS_PER_TRACE, STEPS_PER_TRACE)
        lines = payload.split(b"\n")
        for start in range(0, len(lines), PER_IMPORT):
            import_traces(owner, b"\n".join(lines[start : start + PER_IMPORT]))
        job_key = trained_job_key(stack, trainer)
        result = backfill(stack, job_key, args.traces + 4)
        latencies = steady(stack, owner, args.interval, args.steady_s)
        anyone.close()
    load = os.getloadavg()[0]
    table = Table(title=f"Shared evaluator scoring, {os.cpu_count()} CPUs, load {load:.1f} (MiniLM, CPU)")
    for column in ("measure", "value"):
        table.add_column(column)
    rows = [
        ("traces / actions scored", f"{args.traces + 4} / {int(result['actions'])}"),
        ("publication → every trace scored", f"{result['elapsed']:.0f} s"),
        ("actions/s (first job → last score)", f"{result['actions'] / result['scoring_s']:.1f}"),
        ("peak worker memory (VmHWM)", f"{result['peak_mb']:.0f} MB"),
        (f"steady imports (1 every {args.interval:g} s, {args.steady_s:g} s)", str(len(latencies))),
        ("import → shared credit p50", f"{statistics.median(latencies):.1f} s"),
        ("import → shared credit p95", f"{latencies[int(0.95 * (len(latencies) - 1))]:.1f} s"),
        ("import → shared credit max", f"{latencies[-1]:.1f} s"),
        ("settings", f"batch_traces {args.batch_traces}, debounce {args.debounce_s:g} s, 2 active batches"),
    ]
    for row in rows:
        table.add_row(*row)
    Console().print(table)


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


if __name__ == "__main__":
    main()
