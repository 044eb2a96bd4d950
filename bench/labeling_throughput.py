"""Labeling throughput, in this process and through the running services, and provider calls for growing traces.

1. Rule-based labelling + scoring of the 100k-step set (the same conversations as the import
   benchmark), in this process: chunking, labels, scores and the per-step layout the API returns.
2. The same steps through the running services (`stash-rm up` on free ports in its own data directory):
   POST /traces/import, ingest announces the revisions, the labeler reads each from ingest, labels and
   scores it and stores the evaluation. Timed from the import request to the last evaluation stored
   (its `finished_at`), `--runs` times after a warm-up import, each run with its own traces, the stack
   let go quiet before each; the median, and the CPU seconds each service spent on it. `--stack-database`
   names where the services keep their tables: `postgresql` (ingest, gateway and labeler in one fresh
   database on 127.0.0.1:5432, like the import benchmark) or `sqlite` (the embedded profile's files);
   `--evaluation-processes` how many processes the labeler evaluates in (a stack for each; the labeler's CPU
   counts its forked processes').
3. Provider calls per trace for a growing trace: a conversation evaluated after every new turn
   with the LLM labeler (the real `openai` client against the local stand-in server that speaks
   the OpenAI wire protocol), keeping unchanged chunks' labels, against labeling every chunk again.

    .venv/bin/python bench/labeling_throughput.py [--steps 100000] [--runs 3] [--stack-database postgresql sqlite]
        [--evaluation-processes 1 2] [--turns 20]
"""

from __future__ import annotations

import argparse
import os
import re
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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import psycopg
from rich.console import Console
from rich.table import Table

sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parents[1] / "tests")]

from fakes.llm_server import FakeLLM  # noqa: E402
from import_throughput import fresh_database, load, make_payload, wait_until_quiet  # noqa: E402

from stash_common.steps import TraceStep  # noqa: E402
from stash_ingest.adapters.stash import parse_stash  # noqa: E402
from stash_labeler.chunks import cut_chunks  # noqa: E402
from stash_labeler.evaluation import KeptLabel, evaluate  # noqa: E402
from stash_labeler.labeling.llm import OpenAILabeler  # noqa: E402
from stash_labeler.labeling.rule_labeler import RuleLabeler, label_chunks  # noqa: E402
from stash_labeler.traces import LabelerTrace  # noqa: E402


def labeler_traces(payload: bytes) -> list[LabelerTrace]:
    """The payload's traces as the labeler reads them (what GetTraceRevision would return)."""
    traces = []
    for number, trace in enumerate(parse_stash(payload)):
        steps = tuple(
            TraceStep(
                f"{number}-{index}", index, step.role, step.content, step.tool_name,
                dict(step.tool_input) if step.tool_input is not None else None, step.tool_call_id, dict(step.metadata),
            )
            for index, step in enumerate(trace.steps)
        )  # fmt: skip
        traces.append(LabelerTrace(f"trace-{number}", "bench", 1, "stash", steps))
    return traces


def rule_throughput(traces: list[LabelerTrace]) -> float:
    """Seconds to label and score every trace with the rule-based labeler."""
    labeler = RuleLabeler()
    started = time.perf_counter()
    for trace in traces:
        evaluate(trace, labeler, {})
    return time.perf_counter() - started


# --- through the running services -----------------------------------------------------------------

SERVICES = ("gateway", "ingest", "labeler")
WARM_UP_STEPS = 1_000
LABELING_WAIT_S = 1_800.0


@dataclass(frozen=True)
class ServicesRun:
    """One import through the running stack: when it was acknowledged, when its last evaluation was stored."""

    import_s: float
    labeled_s: float
    cpu_s: dict[str, float]


@dataclass(frozen=True)
class RunningStack:
    """A `stash-rm up` on free ports: its gateway, a user's key, and where the labeler keeps its evaluations."""

    data_dir: Path
    gateway_url: str
    key: str
    database_url: str | None  # None: the labeler's SQLite file in the data directory

    def evaluations(self) -> tuple[int, int, datetime | None]:
        """Succeeded and failed evaluations, and when the last one finished (UTC)."""
        query = (
            "SELECT sum(CASE WHEN status = 'succeeded' THEN 1 ELSE 0 END), "
            "sum(CASE WHEN status = 'failed' THEN 1 ELSE 0 END), max(finished_at) FROM evaluations"
        )
        if self.database_url is None:
            with sqlite3.connect(f"file:{self.data_dir / 'labeler.db'}?mode=ro", uri=True, timeout=30) as db:
                succeeded, failed, finished = db.execute(query).fetchone()
            finished = datetime.fromisoformat(finished).replace(tzinfo=UTC) if finished else None
        else:
            with psycopg.connect(self.database_url) as db:
                succeeded, failed, finished = db.execute(query).fetchone()
        return int(succeeded or 0), int(failed or 0), finished

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds (user + system) each service has used so far, with its forked evaluation processes."""
        seconds = {}
        for name in SERVICES:
            pid = (self.data_dir / "run" / f"{name}.pid").read_text().strip()
            forked = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            seconds[name] = sum(_cpu_seconds(process) for process in (pid, *forked))
        return seconds


def _cpu_seconds(pid: str) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def running_stack(database_url: str | None, data_dir: Path, processes: int) -> Iterator[RunningStack]:
    """`stash-rm up` on free ports, the labeler evaluating in `processes` processes; ingest, the gateway and the
    labeler on `database_url` when one is given."""
    env = {
        **os.environ,
        "STASH_DATA_DIR": str(data_dir),
        "STASH_GATEWAY_OTLP_GRPC_PORT": str(_free_port()),
        "STASH_LABELER_EVALUATION_PROCESSES": str(processes),
    }
    for name in ("gateway", "ingest", "labeler", "trainer", "scorer", "gepa"):
        env[f"STASH_{name.upper()}_PORT"] = str(_free_port())
        if database_url is not None and name.upper() in ("GATEWAY", "INGEST", "LABELER"):
            env[f"STASH_{name.upper()}_DATABASE_URL"] = database_url
    stack = subprocess.Popen(
        [sys.executable, "-m", "stash_cli", "up"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        assert stack.stdout is not None
        said = []
        while "Gateway:" not in (line := stack.stdout.readline()):
            said.append(line)
            if not line and stack.poll() is not None:
                raise RuntimeError(f"stash-rm up exited before serving: {''.join(said)}")
        threading.Thread(target=stack.stdout.read, daemon=True).start()
        created = subprocess.run(
            [sys.executable, "-m", "stash_cli", "users", "create", "bench"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        key = created.stdout.split("shown once): ")[1].split()[0]
        yield RunningStack(data_dir, f"http://127.0.0.1:{env['STASH_GATEWAY_PORT']}", key, database_url)
    finally:
        stack.send_signal(signal.SIGINT)
        stack.wait(timeout=120)


def through_services(args: argparse.Namespace, database: str, processes: int) -> list[ServicesRun]:
    """`--runs` imports of `--steps` steps, each timed until its last evaluation is stored, after a warm-up."""
    with tempfile.TemporaryDirectory(prefix="stash-labeling-bench-") as scratch:
        if database == "postgresql":
            with fresh_database() as url, running_stack(url, Path(scratch), processes) as stack:
                return _timed_imports(stack, args)
        with running_stack(None, Path(scratch), processes) as stack:
            return _timed_imports(stack, args)


def _timed_imports(stack: RunningStack, args: argparse.Namespace) -> list[ServicesRun]:
    client = httpx.Client(
        base_url=f"{stack.gateway_url}/api/v1/rm", headers={"Authorization": f"Bearer {stack.key}"}, timeout=900
    )
    runs, traces = [], 0
    for number in range(args.runs + 1):
        steps = args.steps if number else WARM_UP_STEPS
        body = orjson.dumps(
            {"format": "stash", "data": make_payload(steps, args.steps_per_trace, f"run{number}").decode()}
        )
        traces += steps // args.steps_per_trace
        wait_until_quiet(stack.data_dir)
        runs.append(_timed_import(stack, client, body, traces))
    return runs[1:]  # the first warmed the stack up


def _timed_import(stack: RunningStack, client: httpx.Client, body: bytes, traces: int) -> ServicesRun:
    cpu_before = stack.cpu_seconds()
    started_at = datetime.now(UTC)
    started = time.perf_counter()
    client.post("/traces/import", content=body, headers={"Content-Type": "application/json"}).raise_for_status()
    import_s = time.perf_counter() - started
    while True:
        succeeded, failed, finished = stack.evaluations()
        if failed:
            raise RuntimeError(f"{failed} evaluations failed; see {stack.data_dir / 'logs' / 'labeler.log'}")
        if succeeded >= traces and finished is not None:
            break
        if time.perf_counter() - started > LABELING_WAIT_S:
            raise TimeoutError(f"{succeeded} of {traces} evaluations stored after {LABELING_WAIT_S:.0f}s")
        time.sleep(0.05)
    cpu_after = stack.cpu_seconds()
    cpu = {name: cpu_after[name] - cpu_before[name] for name in SERVICES}
    return ServicesRun(import_s, (finished - started_at).total_seconds(), cpu)


def services_rows(table: Table, steps: int, database: str, runs: list[ServicesRun]) -> None:
    """The median run's rows: the import, the labels stored, the labeler's own rate, and CPU per service."""
    median = sorted(runs, key=lambda run: run.labeled_s)[len(runs) // 2]
    each = ", ".join(f"{run.labeled_s:.2f}" for run in runs)
    labeling_s = median.labeled_s - median.import_s
    table.add_row(f"{database}: import acknowledged", f"{median.import_s:.2f} s", f"{steps / median.import_s:,.0f}")
    table.add_row(
        f"{database}: import → every evaluation stored (median of {len(runs)}: {each})",
        f"{median.labeled_s:.2f} s",
        f"{steps / median.labeled_s:,.0f}",
    )
    table.add_row(
        f"{database}: acknowledged → every evaluation stored", f"{labeling_s:.2f} s", f"{steps / labeling_s:,.0f}"
    )
    cpu = ", ".join(f"{name} {seconds:.1f}" for name, seconds in median.cpu_s.items())
    table.add_row(f"{database}: CPU seconds of the services in that run", cpu, "")


def growing_conversation(turns: int) -> list[LabelerTrace]:
    """Snapshots of one conversation after each turn (a request, a tool call with its result, an answer)."""
    steps: list[TraceStep] = [TraceStep("s0", 0, "system", "You are a support agent.")]
    snapshots = []
    for turn in range(turns):
        n = len(steps)
        steps += [
            TraceStep(f"s{n}", n, "user", f"Where is order {turn}? It should have arrived."),
            TraceStep(f"s{n + 1}", n + 1, "assistant", "", "lookup_order", {"order_id": str(turn)}, f"call_{turn}"),
            TraceStep(f"s{n + 2}", n + 2, "tool", '{"status": "in transit"}', "lookup_order", f"call_{turn}"),
            TraceStep(f"s{n + 3}", n + 3, "assistant", f"Order {turn} is in transit."),
        ]
        snapshots.append(LabelerTrace("growing", "bench", turn + 1, "stash", tuple(steps)))
    return snapshots


def answer_like_a_labeler(_path: str, body: dict[str, Any]) -> str:
    """The stand-in's answer: the rule-based label of the chunk the request names."""
    transcript = "\n".join(str(message.get("content")) for message in body["messages"])
    target = re.findall(r"\bc\d+\b", str(body["messages"][-1]["content"]))[-1]
    chunk_count = max(int(found[1:]) for found in re.findall(r"\bc\d+\b", transcript)) + 1
    return orjson.dumps(_rule_labels(chunk_count)[target]).decode()


def _rule_labels(chunk_count: int) -> dict[str, dict[str, Any]]:
    snapshot = growing_conversation((chunk_count + 2) // 3)[-1]
    return {label.chunk_id: label.model_dump(exclude_none=True) for label in label_chunks(cut_chunks(snapshot))}


def provider_calls(turns: int) -> tuple[int, int, float]:
    """Calls made while a conversation grows turn by turn: incremental, and labeling every chunk each time."""
    fake = FakeLLM().start()
    fake.reply = answer_like_a_labeler
    try:
        client = openai.OpenAI(api_key="bench", base_url=f"{fake.url}/v1", max_retries=0)
        labeler = OpenAILabeler(client, "bench-model")
        kept: dict[str, KeptLabel] = {}
        started = time.perf_counter()
        for snapshot in growing_conversation(turns):
            kept = evaluate(snapshot, labeler, kept).labels
        seconds = time.perf_counter() - started
        incremental = len(fake.requests)
    finally:
        fake.stop()
    every_chunk = sum(len(cut_chunks(snapshot)) for snapshot in growing_conversation(turns))
    return incremental, every_chunk, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--steps-per-trace", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3, help="timed imports through the services, after a warm-up")
    parser.add_argument(
        "--stack-database", nargs="*", choices=("postgresql", "sqlite"), default=["postgresql", "sqlite"],
        help="where the services keep their tables; none: skip the services",
    )  # fmt: skip
    parser.add_argument(
        "--evaluation-processes", nargs="+", type=int, default=[1, 2],
        help="the labeler's STASH_LABELER_EVALUATION_PROCESSES, a stack for each",
    )  # fmt: skip
    parser.add_argument("--turns", type=int, default=20, help="turns of the growing trace; 0: skip the provider calls")
    args = parser.parse_args()
    loads = [load()]
    traces = labeler_traces(make_payload(args.steps, args.steps_per_trace))
    seconds = rule_throughput(traces)
    services = {
        (database, processes): through_services(args, database, processes)
        for database in args.stack_database
        for processes in args.evaluation_processes
    }
    loads.append(load())
    table = Table("measure", "value", "steps/s", title=f"Labeling; {'; '.join(loads)}")
    table.add_row(
        f"in process: rule labels + scores, {args.steps:,} steps in {len(traces):,} traces",
        f"{seconds:.2f} s",
        f"{args.steps / seconds:,.0f}",
    )
    for (database, processes), runs in services.items():
        services_rows(table, args.steps, f"{database}, {processes} evaluation process(es)", runs)
    if args.turns:
        provider_rows(table, args.turns)
    Console(width=160).print(table)


def provider_rows(table: Table, turns: int) -> None:
    """Provider calls for a trace growing over `turns` turns, incremental against relabeling every chunk."""
    incremental, every_chunk, llm_seconds = provider_calls(turns)
    table.add_row(f"provider calls, a trace growing over {turns} turns (incremental)", f"{incremental}", "")
    table.add_row("provider calls if every chunk were relabeled each time", f"{every_chunk}", "")
    table.add_row("calls per evaluated revision (incremental)", f"{incremental / turns:.1f}", "")
    table.add_row("LLM labeling wall time against the local stand-in", f"{llm_seconds:.2f} s", "")


if __name__ == "__main__":
    main()
