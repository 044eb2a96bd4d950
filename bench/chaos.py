"""Faults under load: kill -9 each service in turn, stop PostgreSQL and Redis, then count what was lost.

    .venv/bin/python bench/chaos.py [--profile both|embedded|cluster] [--seconds 120] [--fault-every 12]
                                    [--store-outage 10]

Each profile runs under `stash-rm up` supervision (which restarts a killed service). The cluster profile runs on
a PostgreSQL and a Redis of the bench's own (`tests/support/stores.py`: initdb + pg_ctl and redis-server on free
ports; the machine's shared servers are never stopped) and the tests' S3 server (moto); the embedded profile on
SQLite files and the local artifact directory. The load, for `--seconds`: OTLP/HTTP spans through the
OpenTelemetry SDK's exporter (which retries 429/502/503/504 with backoff), REST imports, an annotation on each
imported trace, one reward model's training, then one scoring run and one GEPA run against the stand-in LLM
(tests/fakes/llm_server.py). Every `--fault-every` seconds comes the next fault, in turn: SIGKILL of a service
(gateway, ingest, labeler, trainer, scorer, gepa), and in the cluster profile PostgreSQL stopped (immediate
mode: connections cut) and Redis killed, each for `--store-outage` seconds, for as long as the load runs and
the jobs go on (at most JOBS_S after the load); a job a fault failed with a reason to retry is retried, as its
owner would. Then the bench waits for one lease and one sweep and prints, per profile:

- acknowledged vs stored: spans (the exporter's SUCCESS), traces (REST 200s and the OTLP traces of
  acknowledged spans), annotations (201s); the goal is equal;
- jobs (the model, the scoring run, the GEPA run) still queued or running once one lease and one
  sweep have passed after the last fault; the goal is 0 (a job failed by a fault is terminal, and the
  table says how it ended);
- every HTTP answer that was not 2xx, by status (REST and the exporter's, retries included), and the
  connections refused or reset; the goal is no 500 and nothing but retryable statuses (429, 502-504) from the
  faults;
- requests that hung (no answer within HUNG_S) instead of failing fast with a retryable status;
- what the services logged above info level (from their log files), by service and event.
"""

from __future__ import annotations

import argparse
import itertools
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
import psycopg
import requests
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from fakes.llm_server import FakeLLM  # noqa: E402

from support.logs import complaint_counts  # noqa: E402
from support.models import new_bucket, offline_training_env  # noqa: E402
from support.processes import free_port, stash_rm, wait_for_http  # noqa: E402
from support.stack import cluster_env, launch_up, read_until  # noqa: E402
from support.stores import PrivatePostgres, PrivateRedis, private_postgres, private_redis  # noqa: E402

SERVICES = ("gateway", "ingest", "labeler", "trainer", "scorer", "gepa")
HUNG_S = 20.0  # a request with no answer after this hung: a retryable failure must come sooner
RETRYABLE = {429, 502, 503, 504}
JOBS_S = 240.0  # how long after the load the jobs (and the kills) may go on
SETTLE_S = 6.0 + 30.0 + 10.0  # one lease, one (the longest) sweep, and a margin after the last fault
EXPORT_TIMEOUT_S = 30  # the exporter's budget for one batch, retries included: longer than a restart
TASK, REFLECTION = "openai/stand-in-task", "openai/stand-in-reflection"


@dataclass
class Tally:
    """What the load had acknowledged, and how its requests went."""

    spans: set[tuple[str, str]] = field(default_factory=set)  # (trace id hex, span id hex)
    traces: set[str] = field(default_factory=set)  # REST-imported trace ids
    annotations: set[str] = field(default_factory=set)
    requests: int = 0
    retried: int = 0  # answered with a retryable status or a refused connection, then tried again
    answers: Counter[str] = field(default_factory=Counter)  # every non-2xx HTTP answer (REST, OTLP), by status
    hung: int = 0
    dropped_spans: int = 0  # spans whose export the SDK gave up on: never acknowledged, so not counted as lost
    job_retries: int = 0  # jobs a kill failed with a reason to retry, retried as their owner would
    job_failures: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, **changes: int) -> None:
        with self.lock:
            for name, delta in changes.items():
                setattr(self, name, getattr(self, name) + delta)

    def answered(self, what: str, status: int | None) -> None:
        """Note an answer that was not 2xx (`status` None: the connection was refused or reset)."""
        if status is None or not 200 <= status < 300:
            with self.lock:
                self.answers[f"{what} {status or 'refused/reset'}"] += 1


class CountingExporter(OTLPSpanExporter):
    """The SDK's OTLP/HTTP exporter (it retries retryable answers itself), counting what the gateway acknowledged
    and, through its HTTP session, every answer (retries included)."""

    def __init__(self, tally: Tally, **options: Any) -> None:
        session = requests.Session()
        session.hooks["response"].append(lambda response, *_, **__: tally.answered("OTLP", response.status_code))
        super().__init__(session=session, **options)
        self.tally = tally

    def export(self, spans: Any) -> SpanExportResult:
        result = super().export(spans)
        with self.tally.lock:
            if result is SpanExportResult.SUCCESS:
                self.tally.spans.update(_span_key(span) for span in spans)
            else:
                self.tally.dropped_spans += len(spans)
        return result


def _span_key(span: ReadableSpan) -> tuple[str, str]:
    context = span.get_span_context()
    assert context is not None
    return f"{context.trace_id:032x}", f"{context.span_id:016x}"


@contextmanager
def s3_server() -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
    command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(url)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


def stand_in_llm(_path: str, body: dict[str, Any]) -> str:
    """The task model gives the reference number; the reflection model names the skill and proposes a rule."""
    prompt = body["messages"][-1]["content"]
    if body["model"] == "stand-in-reflection":
        if prompt.startswith("You name a skill"):
            return '{"name": "Refund Desk", "description": "Use when a customer asks for a refund."}'
        return "```\nAlways give the customer the refund reference number.\n```"
    return "Your refund is approved. Your refund reference number is R-1-77."


@dataclass
class Profile:
    """What one profile's stack runs on, and how the bench reads what it stored."""

    name: str
    env: dict[str, str]
    postgres: PrivatePostgres | None = None
    redis: PrivateRedis | None = None

    def rows(self, data_dir: Path, sql: str) -> set[tuple[Any, ...]]:
        """The rows of a SELECT over ingest's tables: in PostgreSQL, or in the data directory's SQLite file."""
        if self.postgres is None:
            with sqlite3.connect(data_dir / "ingest.db") as connection:
                return set(connection.execute(sql).fetchall())
        with psycopg.connect(self.postgres.url) as connection:
            return set(connection.execute(sql).fetchall())


def make_profile(name: str, llm: FakeLLM, stack: ExitStack) -> Profile:
    """The embedded profile (SQLite files, local artifacts), or the cluster one on stores of the bench's own
    (entered on `stack`, which stops them)."""
    env = {"STASH_GEPA_REFLECTION_API_BASE": f"{llm.url}/v1", "STASH_GEPA_MAX_LENGTH": "128"}
    if name == "embedded":
        return Profile(name, {**env, "STASH_TRAINER_MAX_LENGTH": "128"})
    postgres, redis_server = stack.enter_context(private_postgres()), stack.enter_context(private_redis())
    s3_url = stack.enter_context(s3_server())
    env |= {**cluster_env(postgres.url, redis_server.url), **offline_training_env(new_bucket(s3_url, "chaos"), s3_url)}
    return Profile(name, env, postgres, redis_server)


@contextmanager
def supervised_stack(data_dir: Path, profile: Profile) -> Iterator[dict[str, str]]:
    """`stash-rm up` in the profile until the gateway is up; SIGINT afterwards. Its environment."""
    env = {
        **os.environ,
        "STASH_DATA_DIR": str(data_dir),
        "STASH_GATEWAY_PORT": str(free_port()),
        "STASH_GATEWAY_OTLP_GRPC_PORT": str(free_port()),
        "COLUMNS": "200",
        **profile.env,
    }
    for name in ("ingest", "labeler", "trainer", "scorer", "gepa"):
        port = free_port()
        env[f"STASH_{name.upper()}_PORT"] = str(port)
        env[f"STASH_{name.upper()}_ADDRESS"] = f"127.0.0.1:{port}"
    process = launch_up(env)
    try:
        read_until(process, "Gateway:", timeout_s=180)
        threading.Thread(target=_drain_output, args=(process, data_dir / "up.log"), daemon=True).start()
        yield env
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)


def _drain_output(process: subprocess.Popen[str], log: Path) -> None:
    """Keep `up`'s output flowing (a full pipe would block it) into a log file."""
    assert process.stdout is not None
    with log.open("a") as out:
        for line in process.stdout:
            out.write(line)


def call(tally: Tally, client: httpx.Client, method: str, path: str, **options: Any) -> httpx.Response | None:
    """One request, tried again after a retryable answer until it gets another; None when it hung."""
    while True:
        tally.count(requests=1)
        started = time.monotonic()
        try:
            response = client.request(method, path, timeout=HUNG_S, **options)
        except httpx.TimeoutException:
            tally.count(hung=1)
            return None
        except httpx.TransportError:  # the gateway is being restarted: refused at once, which is fast
            response = None
        tally.answered("REST", response.status_code if response is not None else None)
        if response is not None and time.monotonic() - started > HUNG_S:
            tally.count(hung=1)
        if response is not None and response.status_code not in RETRYABLE:
            return response
        tally.count(retried=1)
        time.sleep(0.5)


def rest_load(tally: Tally, client: httpx.Client, until: float) -> None:
    """Import one small trace at a time and rate its reply, until `until`."""
    for number in itertools.count():
        if time.monotonic() > until:
            return
        steps = [
            {"role": "user", "content": f"Refund for order {number}?"},
            {"role": "assistant", "content": f"Approved, reference R-{number}."},
        ]
        trace = orjson.dumps({"id": f"chaos-{number}", "steps": steps}).decode()
        imported = call(tally, client, "POST", "/traces/import", json={"format": "stash", "data": trace})
        if imported is None or imported.status_code != 200:
            continue
        trace_id = imported.json()["trace_ids"][0]
        with tally.lock:
            tally.traces.add(trace_id)
        read = call(tally, client, "GET", f"/traces/{trace_id}")
        if read is None or read.status_code != 200:
            continue
        body = {"step_id": read.json()["steps"][1]["id"], "rating": 1 if number % 2 else -1}
        annotated = call(tally, client, "POST", f"/traces/{trace_id}/annotations", json=body)
        if annotated is not None and annotated.status_code == 201:
            with tally.lock:
                tally.annotations.add(annotated.json()["id"])


def otlp_load(tally: Tally, api_url: str, key: str, until: float) -> TracerProvider:
    """Agent-shaped spans (an AGENT root with an LLM child) through the SDK, until `until`; its provider."""
    headers = {"Authorization": f"Bearer {key}"}
    exporter = CountingExporter(tally, endpoint=f"{api_url}/otel/v1/traces", headers=headers, timeout=EXPORT_TIMEOUT_S)
    provider = TracerProvider(resource=Resource.create({"service.name": "chaos-agent"}))
    provider.add_span_processor(BatchSpanProcessor(exporter, max_export_batch_size=64, schedule_delay_millis=200))
    tracer = provider.get_tracer("chaos")
    for number in itertools.count():
        if time.monotonic() > until:
            return provider
        with tracer.start_as_current_span("agent", attributes={"openinference.span.kind": "AGENT"}):
            attributes = {
                "openinference.span.kind": "LLM",
                "llm.input_messages.0.message.role": "user",
                "llm.input_messages.0.message.content": f"Where is parcel {number}?",
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": f"Parcel {number} ships today.",
            }
            with tracer.start_as_current_span("llm", attributes=attributes):
                pass
        time.sleep(0.02)
    return provider


def faults(profile: Profile) -> list[str]:
    """The faults of a profile, in the order they come: every service killed, then each store stopped."""
    stores = ["postgres", "redis"] if profile.postgres is not None else []
    return [*SERVICES, *stores]


def chaos(
    data_dir: Path, profile: Profile, done: threading.Event, every_s: float, outage_s: float, log: list[str]
) -> None:
    """The next fault every `every_s` seconds, in turn, until `done`: a service killed (and waited for until `up`
    restarted it), or a store stopped for `outage_s` seconds and started again."""
    for fault in itertools.cycle(faults(profile)):
        if done.wait(every_s):
            return
        log.append(fault)
        if fault == "postgres" and profile.postgres is not None:
            _outage(profile.postgres.stop, profile.postgres.start, outage_s)
        elif fault == "redis" and profile.redis is not None:
            _outage(profile.redis.stop, profile.redis.start, outage_s)
        else:
            _kill(data_dir, fault)


def _outage(stop: Callable[[], None], start: Callable[[], None], outage_s: float) -> None:
    stop()
    time.sleep(outage_s)
    start()


def _kill(data_dir: Path, service: str) -> None:
    pid_file = data_dir / "run" / f"{service}.pid"
    old = int(pid_file.read_text())
    os.kill(old, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not pid_file.exists() or int(pid_file.read_text() or old) == old):
        time.sleep(0.2)


def jobs(tally: Tally, client: httpx.Client, rated: list[str], until: float, llm_base: str) -> dict[str, str]:
    """Train one model, then score one trace with it and run GEPA against it; each one's path."""
    created = call(tally, client, "POST", "/reward-models", json={"name": "chaos", "trace_ids": rated, "epochs": 2})
    assert created is not None and created.status_code == 200, created and created.text
    model_path = f"/reward-models/{created.json()['id']}"
    paths = {"training": model_path}
    model = _finished(tally, client, model_path, until)
    if model.get("status") != "succeeded":
        return paths
    scored = call(tally, client, "POST", f"/traces/{rated[0]}/score", json={"reward_model_id": model["id"]})
    if scored is not None and scored.status_code == 202:
        paths["scoring"] = f"/traces/{rated[0]}#{model['id']}"  # the trace's detail lists its scoring runs
    body = {"reward_model_id": model["id"], "task_model": TASK, "reflection_model": REFLECTION}
    body |= {"task_api_base": llm_base, "max_metric_calls": 12}
    gepa = call(tally, client, "POST", "/gepa-runs", json=body)
    if gepa is not None and gepa.status_code == 200:
        paths["gepa"] = f"/gepa-runs/{gepa.json()['id']}"
        _finished(tally, client, paths["gepa"], until)
    return paths


def _finished(tally: Tally, client: httpx.Client, path: str, until: float) -> dict[str, Any]:
    """The job at `path` once it settled, retried (as its owner would) when a kill failed it with "retry"."""
    while time.monotonic() < until:
        found = call(tally, client, "GET", path)
        body = found.json() if found is not None and found.status_code == 200 else {}
        if body.get("status") == "failed" and (body.get("error") or "").endswith("; retry"):
            tally.count(job_retries=1)
            tally.job_failures.append(f"{path.split('/')[1]}: {body['error']}")
            call(tally, client, "POST", f"{path}/retry")
        elif body.get("status") in ("succeeded", "failed"):
            return body
        time.sleep(1.0)
    return {}


def stored(rows: Callable[[str], set[tuple[Any, ...]]], tally: Tally) -> dict[str, int]:
    """What the profile's database holds of what the load had acknowledged."""
    spans = rows("select trace_id, span_id from otel_spans")
    trace_ids = {row[0] for row in rows("select id from traces")}
    external = {row[0] for row in rows("select external_id from traces")}
    annotations = {row[0] for row in rows("select id from annotations")}
    otlp_traces = {trace_id for trace_id, _ in tally.spans}
    return {
        "spans": len(tally.spans & spans),
        "traces": len(tally.traces & trace_ids) + len({t for t in otlp_traces if t in external or t in trace_ids}),
        "annotations": len(tally.annotations & annotations),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=("both", "embedded", "cluster"), default="both")
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--fault-every", type=float, default=12.0)
    parser.add_argument("--store-outage", type=float, default=10.0)
    args = parser.parse_args()
    for name in ("embedded", "cluster") if args.profile == "both" else (args.profile,):
        load_before = os.getloadavg()[0]
        llm = FakeLLM().start()
        llm.reply = stand_in_llm
        with ExitStack() as stack:
            result = run_profile(make_profile(name, llm, stack), llm, args)
        llm.stop()
        report(name, *result, load=(load_before, os.getloadavg()[0]))


def run_profile(profile: Profile, llm: FakeLLM, args: argparse.Namespace) -> tuple[Any, ...]:
    """The load and the faults on one profile's stack; what `report` prints."""
    tally, fault_log = Tally(), []
    with tempfile.TemporaryDirectory(prefix="stash-chaos-") as scratch, supervised_stack(Path(scratch), profile) as env:
        created = stash_rm("users", "create", "chaos", env=env)
        key = created.stdout.split("shown once): ")[1].split()[0]
        api_url = f"http://127.0.0.1:{env['STASH_GATEWAY_PORT']}/api/v1/rm"
        client = httpx.Client(base_url=api_url, headers={"Authorization": f"Bearer {key}"})
        rated = _rated(tally, client)
        until = time.monotonic() + args.seconds
        paths: dict[str, str] = {}
        load_done, jobs_done, stop_chaos = threading.Event(), threading.Event(), threading.Event()

        def run_jobs() -> None:
            paths.update(jobs(tally, client, rated, until + JOBS_S, f"{llm.url}/v1"))
            jobs_done.set()

        def end_of_chaos() -> None:
            load_done.wait()
            jobs_done.wait(max(0.0, until + JOBS_S - time.monotonic()))
            stop_chaos.set()

        faulting = (Path(scratch), profile, stop_chaos, args.fault_every, args.store_outage, fault_log)
        threads = [
            threading.Thread(target=rest_load, args=(tally, client, until)),
            threading.Thread(target=chaos, args=faulting),
            threading.Thread(target=run_jobs),
            threading.Thread(target=end_of_chaos),
        ]
        for thread in threads:
            thread.start()
        provider = otlp_load(tally, api_url, key, until)
        threads[0].join()
        load_done.set()
        provider.force_flush(120_000)
        provider.shutdown()
        for thread in threads[1:]:
            thread.join()
        time.sleep(SETTLE_S)  # one lease and one sweep after the last fault: what is still running stays so
        states = {name: _status(client, path) for name, path in paths.items()}
        counts = stored(lambda sql: profile.rows(Path(scratch), sql), tally)
        logged = complaint_counts(Path(scratch))
    return tally, counts, states, fault_log, logged


def _rated(tally: Tally, client: httpx.Client) -> list[str]:
    """Six rated refund traces for the model to train on."""
    trace_ids = []
    for number in range(6):
        reply = "Approved: reference R-77." if number % 2 == 0 else "Sorry, I cannot help."
        steps = [
            {"role": "user", "content": f"Refund for order {1100 + number}"},
            {"role": "assistant", "content": reply},
        ]
        data = orjson.dumps({"id": f"rated-{number}", "steps": steps}).decode()
        imported = call(tally, client, "POST", "/traces/import", json={"format": "stash", "data": data})
        assert imported is not None and imported.status_code == 200, imported and imported.text
        trace_id = imported.json()["trace_ids"][0]
        step = client.get(f"/traces/{trace_id}").json()["steps"][1]
        rating = {"step_id": step["id"], "rating": 1 if number % 2 == 0 else -1}
        annotated = call(tally, client, "POST", f"/traces/{trace_id}/annotations", json=rating)
        assert annotated is not None and annotated.status_code == 201
        tally.traces.add(trace_id)
        tally.annotations.add(annotated.json()["id"])
        trace_ids.append(trace_id)
    return trace_ids


def _status(client: httpx.Client, path: str) -> str:
    """A job's status and error; `path#model id` is a trace whose scoring run by that model is meant."""
    path, _, model_id = path.partition("#")
    body = client.get(path, timeout=HUNG_S).json()
    if model_id:
        runs = [run for run in body["scoring_runs"] if run["reward_model_id"] == model_id]
        body = runs[0] if runs else {"status": "missing"}
    return f"{body['status']}" + (f" ({body['error']})" if body.get("error") else "")


def report(
    profile: str,
    tally: Tally,
    counts: dict[str, int],
    states: dict[str, str],
    fault_log: list[str],
    logged: Counter[str],
    load: tuple[float, float],
) -> None:
    """The table of acknowledged vs stored, non-2xx answers, jobs left non-terminal, hung requests and logs."""
    otlp_traces = len({trace_id for trace_id, _ in tally.spans})
    faults_run = f"{len(fault_log)} faults ({', '.join(fault_log)})"
    table = Table(title=f"chaos, {profile} profile: {faults_run}; load {load[0]:.1f} → {load[1]:.1f}")
    for column in ("figure", "acknowledged", "stored / value", "goal"):
        table.add_column(column)
    table.add_row("spans", str(len(tally.spans)), str(counts["spans"]), "equal")
    table.add_row("  spans the exporter gave up on (not acknowledged)", "", str(tally.dropped_spans), "")
    table.add_row("traces", str(len(tally.traces) + otlp_traces), str(counts["traces"]), "equal")
    table.add_row("annotations", str(len(tally.annotations)), str(counts["annotations"]), "equal")
    pending = [name for name, state in states.items() if state.split()[0] in ("queued", "running")]
    table.add_row("jobs non-terminal after a sweep", str(len(states)), str(len(pending)), "0")
    for name, state in states.items():
        table.add_row(f"  {name}", "", state[:110], "")
    table.add_row("jobs a fault failed (retried by the bench)", "", str(tally.job_retries), "")
    for failure in tally.job_failures:
        table.add_row("", "", failure[:140], "")
    table.add_row("REST requests (retried)", str(tally.requests), str(tally.retried), "")
    table.add_row("non-2xx answers, retries included", "", str(sum(tally.answers.values())), "only 429/502-504")
    for answer, count in sorted(tally.answers.items()):
        table.add_row(f"  {answer}", "", str(count), "0" if answer.endswith(" 500") else "")
    table.add_row("requests that hung", "", str(tally.hung), "0")
    table.add_row("log records above info", "", str(sum(logged.values())), "")
    # Only the commonest kinds are listed below, so the errors (and tracebacks) among all of them are counted here.
    serious = ("error", "critical", "unstructured")
    errors = sum(count for complaint, count in logged.items() if complaint.split(" ")[1] in serious)
    table.add_row("  errors and lines that are no record, among them", "", str(errors), "")
    for complaint, count in logged.most_common(12):
        table.add_row(f"  {complaint}", "", str(count), "")
    Console(width=200).print(table)


if __name__ == "__main__":
    main()
