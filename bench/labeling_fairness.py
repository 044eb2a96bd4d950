"""Labeling fairness and throughput: one owner's big import against another owner's first label.

Starts `stash-rm up` (embedded profile) on free ports in a temporary data directory, creates two
users, imports `--traces` small support conversations for the first (in requests of `--per-import`
traces), and as soon as the last of them is acknowledged imports one trace for the second. Prints
how long the second owner waited for its first label while the first owner's backlog was queued,
and the labeler's throughput (evaluations per second) measured over `--window` seconds of that
backlog. Evaluations are counted in the labeler's own SQLite file, read-only.

    .venv/bin/python bench/labeling_fairness.py [--traces 90000] [--per-import 10000] [--window 30]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

sys.path[:0] = [str(Path(__file__).parent)]

from import_throughput import make_payload  # noqa: E402

STEPS_PER_TRACE = 5  # a system prompt and one question, tool call, tool result and answer
SMALL_OWNER_WAIT_S = 300.0


@dataclass
class Stack:
    """A running `stash-rm up` and how to reach it."""

    process: subprocess.Popen[str]
    data_dir: Path
    env: dict[str, str]
    url: str

    def create_user(self, name: str) -> str:
        """A user's full-access key, through the CLI."""
        created = subprocess.run(
            [sys.executable, "-m", "stash_cli", "users", "create", name],
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
        )
        return created.stdout.split("shown once): ")[1].split()[0]

    def evaluations(self, status: str) -> int:
        """How many evaluations the labeler's database holds in `status`."""
        with sqlite3.connect(f"file:{self.data_dir / 'labeler.db'}?mode=ro", uri=True, timeout=30) as db:
            return int(db.execute("SELECT count(*) FROM evaluations WHERE status = ?", (status,)).fetchone()[0])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def local_stack() -> Iterator[Stack]:
    """`stash-rm up` on free ports; SIGINT at the end."""
    data_dir = Path(tempfile.mkdtemp(prefix="stash-fairness-bench-"))
    env = {**os.environ, "STASH_DATA_DIR": str(data_dir), "STASH_LOG_LEVEL": "WARNING"}
    for name in ("gateway", "gateway_otlp_grpc", "ingest", "labeler", "trainer", "scorer", "gepa"):
        env[f"STASH_{name.upper()}_PORT"] = str(free_port())
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
        shutil.rmtree(data_dir, ignore_errors=True)


def import_traces(client: httpx.Client, payload: bytes) -> list[str]:
    """One POST /traces/import; the new trace ids."""
    response = client.post("/traces/import", json={"format": "stash", "data": payload.decode()})
    response.raise_for_status()
    return list(response.json()["trace_ids"])


def first_label_s(client: httpx.Client, trace_id: str, since: float) -> float:
    """Seconds from `since` until the trace's evaluation has succeeded."""
    while time.monotonic() - since < SMALL_OWNER_WAIT_S:
        evaluation = client.get(f"/traces/{trace_id}").json()["evaluation"] or {}
        if evaluation.get("status") == "succeeded":
            return time.monotonic() - since
        time.sleep(0.05)
    raise TimeoutError(f"the second owner's trace was not labeled within {SMALL_OWNER_WAIT_S:.0f}s")


def throughput(stack: Stack, window_s: float, traces: int) -> float:
    """Evaluations per second finished over `window_s` (while the backlog lasts)."""
    started, before = time.monotonic(), stack.evaluations("succeeded")
    while time.monotonic() - started < window_s and stack.evaluations("succeeded") < traces:
        time.sleep(0.5)
    return (stack.evaluations("succeeded") - before) / (time.monotonic() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=90_000, help="traces the first owner imports")
    parser.add_argument("--per-import", type=int, default=10_000, help="traces per import request")
    parser.add_argument("--window", type=float, default=30.0, help="seconds the throughput is measured over")
    args = parser.parse_args()
    payload_lines = make_payload(args.traces * STEPS_PER_TRACE, STEPS_PER_TRACE).split(b"\n")
    with local_stack() as stack:
        big = httpx.Client(base_url=stack.url, headers={"Authorization": f"Bearer {stack.create_user('big')}"})
        small = httpx.Client(base_url=stack.url, headers={"Authorization": f"Bearer {stack.create_user('small')}"})
        big.timeout = small.timeout = httpx.Timeout(900)
        import_started = time.monotonic()
        for start in range(0, len(payload_lines), args.per_import):
            import_traces(big, b"\n".join(payload_lines[start : start + args.per_import]))
        import_s = time.monotonic() - import_started
        small_imported = time.monotonic()
        (small_trace,) = import_traces(small, make_payload(STEPS_PER_TRACE, STEPS_PER_TRACE))
        small_wait_s = first_label_s(small, small_trace, small_imported)
        backlog = args.traces + 1 - stack.evaluations("succeeded")  # announced or not yet
        rate = throughput(stack, args.window, args.traces + 1)
    table = Table("figure", "value", title=f"Labeling fairness: {args.traces:,} traces of one owner, one of another")
    table.add_row("first owner's import (all requests)", f"{import_s:.1f} s")
    table.add_row("second owner: import acknowledged → first label", f"{small_wait_s:.2f} s")
    table.add_row("first owner's traces still unlabeled then", f"{backlog:,}")
    table.add_row(f"labeler throughput (over ≤ {args.window:.0f} s of backlog)", f"{rate:.1f} evaluations/s")
    table.add_row("time the backlog needs at that rate", f"{backlog / rate:.0f} s" if rate else "-")
    Console().print(table)


if __name__ == "__main__":
    main()
