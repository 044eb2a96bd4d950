"""Cold start: from `stash-rm up` on an empty data directory to the first imported trace's labels, and where it goes.

    .venv/bin/python bench/cold_start.py [--runs 3]

Each run starts `stash-rm up` (embedded profile, free ports, a new data directory), creates a user through
the gateway's admin route, imports one small trace and polls until its evaluation has succeeded. The
timeline comes from the services' own logs: when each one listened ("serving": its imports and settings
done) and became ready (its migrations done; the gateway: its application started). A second table is
the import time of each service's entry point, one after another (`python -X importtime`, CPU seconds,
with the heaviest packages): the stack starts six of them at once on a machine of few cores, so their sum
over the cores is a floor of the start.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime
from pathlib import Path

import httpx
import orjson
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from support.ingest import stash_line  # noqa: E402
from support.processes import stack_env  # noqa: E402
from support.stack import launch_up, read_until  # noqa: E402

SERVICES = ("ingest", "labeler", "trainer", "scorer", "gepa", "gateway")
LABELS_WAIT_S = 60.0
READY_EVENT = {"gateway": "Application startup complete."}


def one_start(scratch: Path) -> dict[str, float]:
    """One cold start; the seconds from launching `up` to each milestone."""
    env = stack_env(scratch, COLUMNS="200")
    started = time.time()
    process = launch_up(env)
    try:
        read_until(process, "Gateway:", timeout_s=180)
        healthy = time.time() - started
        labelled = _first_labels(f"http://127.0.0.1:{env['STASH_GATEWAY_PORT']}", scratch)
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=60)
    milestones = {"up printed Gateway: (every service ready)": healthy, "first trace labelled": labelled - started}
    return {**_service_milestones(scratch, started), **milestones}


def _first_labels(gateway_url: str, data_dir: Path) -> float:
    """Create a user, import one trace and poll its evaluation; the wall time it succeeded."""
    admin = {"Authorization": f"Bearer {(data_dir / 'admin.key').read_text().strip()}"}
    user = httpx.post(f"{gateway_url}/api/v1/admin/users", json={"name": "cold"}, headers=admin).json()
    client = httpx.Client(
        base_url=f"{gateway_url}/api/v1/rm", headers={"Authorization": f"Bearer {user['key']['key']}"}
    )
    trace_id = client.post("/traces/import", json={"format": "stash", "data": stash_line("cold")}).json()["trace_ids"][
        0
    ]
    deadline = time.monotonic() + LABELS_WAIT_S
    while (client.get(f"/traces/{trace_id}").json()["evaluation"] or {}).get("status") != "succeeded":
        if time.monotonic() > deadline:
            raise TimeoutError(f"trace {trace_id} was not labelled within {LABELS_WAIT_S:.0f}s")
        time.sleep(0.02)
    client.close()
    return time.time()


def _service_milestones(data_dir: Path, started: float) -> dict[str, float]:
    milestones = {}
    for service in SERVICES:
        for line in (data_dir / "logs" / f"{service}.log").read_text().splitlines():
            record = orjson.loads(line) if line.startswith("{") else {}
            event = record.get("event", "")
            seconds = datetime.fromisoformat(record.get("timestamp", "1970-01-01T00:00:00+00:00")).timestamp() - started
            if event == "serving" or event.startswith("Started server process"):
                milestones.setdefault(f"{service} listening", seconds)
            if event == READY_EVENT.get(service, "ready"):
                milestones.setdefault(f"{service} ready", seconds)
    return milestones


def import_times() -> list[tuple[str, float, str]]:
    """(service, CPU seconds importing its entry point, the heaviest top-level packages) for each service."""
    rows = []
    for service in (*SERVICES, "cli"):
        module = f"stash_{service}.main"
        command = [sys.executable, "-X", "importtime", "-c", f"import {module}"]
        report = subprocess.run(command, capture_output=True, text=True, check=True).stderr
        by_package: Counter[str] = Counter()
        for match in re.finditer(r"import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)", report):
            by_package[match.group(2).split(".")[0]] += int(match.group(1))
        heaviest = ", ".join(f"{name} {micros / 1e6:.2f}" for name, micros in by_package.most_common(4))
        rows.append((service, sum(by_package.values()) / 1e6, heaviest))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    runs = []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="stash-cold-") as scratch:
            runs.append(one_start(Path(scratch)))
    console = Console(width=160)
    title = f"cold start, {args.runs} runs, {os.cpu_count()} cores, load {load_before:.1f} → {os.getloadavg()[0]:.1f}"
    table = Table("milestone (seconds after launching stash-rm up)", "median", "min", "max", title=title)
    for milestone in sorted(runs[0], key=lambda name: sorted(run[name] for run in runs)[len(runs) // 2]):
        values = sorted(run[milestone] for run in runs)
        table.add_row(milestone, f"{values[len(values) // 2]:.2f}", f"{values[0]:.2f}", f"{values[-1]:.2f}")
    console.print(table)
    imports = Table("entry point", "import CPU s", "heaviest packages (s)", title="imports, one process at a time")
    rows = import_times()
    for service, seconds, heaviest in rows:
        imports.add_row(service, f"{seconds:.2f}", heaviest)
    imports.add_row("sum of the six services", f"{sum(seconds for _, seconds, _ in rows[:-1]):.2f}", "")
    console.print(imports)


if __name__ == "__main__":
    main()
