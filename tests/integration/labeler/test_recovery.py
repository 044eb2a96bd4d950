"""The labeler as a real process: leases of a killed labeler, start order, and a queue fair between owners."""

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import grpc
import orjson
import pytest
from fakes.llm_server import FakeLLM
from sqlalchemy import text

from stash.rm.v1 import common_pb2, ingest_pb2, ingest_pb2_grpc, labeler_pb2, labeler_pb2_grpc
from stash_common.channels import open_channel
from stash_common.db import make_engine, transaction
from stash_common.leases import LeaseKeeper
from stash_ingest.clients import LabelerClient
from stash_ingest.revisions import Announcer
from stash_ingest.titles import derive_title
from stash_labeler import store
from stash_labeler.evaluation_worker import CLAIM_BATCH, WorkerConfig
from stash_labeler.labeling.rule_labeler import RuleLabeler
from support.ingest import OTHER_OWNER, OWNER, import_payload, serve_ingest, stash_line
from support.labeler import serve_labeler
from support.processes import free_port, free_ports, wait_for_health

DEFAULTS = WorkerConfig()


class Services:
    """Service processes of one test, each logging to its own file, all stopped at the end."""

    def __init__(self, log_dir: Path, database_url: str) -> None:
        self.log_dir = log_dir
        self.database_url = database_url
        self.ports = dict(zip(("ingest", "labeler"), free_ports(2), strict=True))
        self.processes: list[subprocess.Popen[bytes]] = []

    def env(self, **extra: str) -> dict[str, str]:
        """Only the ports and databases: every peer address follows from the ports."""
        return {
            "STASH_DATA_DIR": str(self.log_dir),
            "STASH_INGEST_PORT": str(self.ports["ingest"]),
            "STASH_LABELER_PORT": str(self.ports["labeler"]),
            "STASH_INGEST_DATABASE_URL": self.database_url,
            "STASH_LABELER_DATABASE_URL": self.database_url,
            **extra,
        }

    def start(self, name: str, log_name: str, **extra: str) -> subprocess.Popen[bytes]:
        """`stash-rm serve <name>`, logging to `<log_name>.log`."""
        env = {key: value for key, value in os.environ.items() if not key.endswith("_ADDRESS")}
        with (self.log_dir / f"{log_name}.log").open("wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "stash_cli", "serve", name],
                env={**env, **self.env(**extra)},
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.processes.append(process)
        return process

    def address(self, name: str) -> str:
        """Where a service of this test listens."""
        return f"127.0.0.1:{self.ports[name]}"

    def log(self, log_name: str) -> str:
        """Everything a process wrote."""
        return (self.log_dir / f"{log_name}.log").read_text()

    def stop(self) -> None:
        """SIGTERM what still runs, and wait for it."""
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            process.wait(timeout=30)


@pytest.fixture
def services(tmp_path: Path, postgres_url: str) -> Iterator[Services]:
    running = Services(tmp_path, postgres_url)
    yield running
    running.stop()


def _labeler_stub(services: Services) -> Any:
    return labeler_pb2_grpc.LabelerServiceStub(open_channel(services.address("labeler")))


def _succeeded(stub: Any, trace_id: str, owner: str = OWNER, timeout_s: float = 30) -> Any:
    """The trace's evaluation once it has succeeded."""
    request = labeler_pb2.GetTraceEvaluationRequest(owner_id=owner, trace_id=trace_id)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = stub.GetTraceEvaluation(request, timeout=10)
        if found.HasField("evaluation") and found.evaluation.status == common_pb2.JOB_STATUS_SUCCEEDED:
            return found.evaluation
        time.sleep(0.02)
    raise TimeoutError(f"trace {trace_id} was not evaluated within {timeout_s}s")


def test_an_evaluation_whose_labeler_was_killed_is_evaluated_again_within_seconds(
    services: Services, fake_llm: FakeLLM
) -> None:
    released = threading.Event()

    def never_in_time(_path: str, _body: dict[str, Any]) -> str:
        released.wait(60)
        return "{}"

    fake_llm.reply = never_in_time
    announcer = Announcer(LabelerClient(_labeler_stub(services)).announce_revisions)
    ingest, stop_ingest = serve_ingest(services.database_url, derive_title, announcer, port=services.ports["ingest"])
    try:
        llm = {"STASH_OPENAI_API_KEY": "test", "STASH_OPENAI_BASE_URL": f"{fake_llm.url}/v1"}
        first = services.start("labeler", "first", **llm)
        wait_for_health(services.address("labeler"))
        trace_id = import_payload(ingest, stash_line("killed")).trace_ids[0]
        deadline = time.monotonic() + 30
        while not fake_llm.requests and time.monotonic() < deadline:
            time.sleep(0.02)
        assert fake_llm.requests, services.log("first")  # the first labeler is mid-evaluation

        first.kill()
        first.wait()
        killed = time.monotonic()
        services.start("labeler", "second")  # the rule-based labeler, on the same port
        wait_for_health(services.address("labeler"))
        serving = time.monotonic()
        found = _succeeded(_labeler_stub(services), trace_id)
        evaluated = time.monotonic()
    finally:
        released.set()
        stop_ingest()

    assert found.labeler == "rules"
    # The lease runs out at most `lease_s` after the kill; the second labeler reclaims it on its next round
    # (a LeaseKeeper's round comes every third of a lease).
    renew_every_s = LeaseKeeper("probe", DEFAULTS.lease_s, lambda _: None, lambda: None).renew_every_s
    assert evaluated - killed < max(serving - killed, DEFAULTS.lease_s) + 2 * renew_every_s + 1.0
    assert "evaluations of a stopped worker queued again" in services.log("second")


def test_a_labeler_started_before_ingest_waits_quietly_and_labels_its_first_trace_promptly(
    services: Services,
) -> None:
    services.start("labeler", "labeler")
    wait_for_health(services.address("labeler"))
    services.start("ingest", "ingest")  # only the ports are set: each finds the other at its configured port
    wait_for_health(services.address("ingest"))
    ingest = ingest_pb2_grpc.IngestServiceStub(open_channel(services.address("ingest")))

    imported = time.monotonic()
    trace_id = import_payload(ingest, stash_line("first")).trace_ids[0]
    _succeeded(_labeler_stub(services), trace_id)
    labeled = time.monotonic()
    services.stop()

    assert labeled - imported < 2.0
    log = services.log("labeler")
    assert '"level": "error"' not in log and "Traceback" not in log, log


def test_forked_evaluation_processes_share_the_queue_and_a_killed_one_loses_nothing(services: Services) -> None:
    services.start("ingest", "ingest")
    labeler = services.start("labeler", "labeler", STASH_LABELER_EVALUATION_PROCESSES="2")
    for name in ("ingest", "labeler"):
        wait_for_health(services.address(name))
    ingest = ingest_pb2_grpc.IngestServiceStub(open_channel(services.address("ingest")))
    forked = _children(labeler.pid)
    assert len(forked) == 1, services.log("labeler")

    import_payload(ingest, "\n".join(stash_line(f"first-{n}") for n in range(2000)))
    _wait_succeeded(services, 2000)
    evaluated_by = _evaluating_pids(services.log("labeler"))
    os.kill(forked[0], signal.SIGKILL)  # it may hold a claimed batch: its leases run out, the labeler takes it
    import_payload(ingest, "\n".join(stash_line(f"second-{n}") for n in range(300)))
    _wait_succeeded(services, 2300)
    labeler.terminate()
    labeler.wait(timeout=30)

    assert evaluated_by == {labeler.pid, forked[0]}  # both evaluated some of the first import
    log = services.log("labeler")
    assert "an evaluation process ended" in log, log
    assert not Path(f"/proc/{forked[0]}").exists()  # reaped, not left a zombie


def _children(pid: int) -> list[int]:
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _evaluating_pids(log: str) -> set[int]:
    lines = [orjson.loads(line) for line in log.splitlines() if '"trace evaluated"' in line]
    return {line["pid"] for line in lines}


def _wait_succeeded(services: Services, count: int) -> None:
    engine = make_engine(services.database_url)
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            with engine.connect() as connection:
                query = text("SELECT count(*) FROM evaluations WHERE status = 'succeeded'")
                if connection.execute(query).scalar_one() == count:
                    return
            time.sleep(0.1)
    finally:
        engine.dispose()
    raise TimeoutError(f"{count} evaluations did not succeed within 120s:\n{services.log('labeler')[-3000:]}")


def test_ingest_answers_unavailable_until_its_tables_are_migrated(tmp_path: Path, empty_postgres_url: str) -> None:
    """A labeler's early call must find ingest starting (UNAVAILABLE, retried quietly), not its tables missing."""
    services = Services(tmp_path, empty_postgres_url)
    blocker = make_engine(empty_postgres_url).connect()
    try:
        # Ingest's migration waits on this uncommitted table of the same name: ingest listens, but cannot migrate.
        blocker.execute(text("CREATE TABLE alembic_version_ingest (version_num varchar(32) NOT NULL)"))
        services.start("ingest", "ingest")
        wait_for_health(services.address("ingest"), expected="NOT_SERVING")
        ingest = ingest_pb2_grpc.IngestServiceStub(open_channel(services.address("ingest")))
        with pytest.raises(grpc.RpcError) as starting:
            ingest.ListTraceRevisions(ingest_pb2.ListTraceRevisionsRequest(), timeout=10)
        blocker.rollback()
        wait_for_health(services.address("ingest"))
        listed = ingest.ListTraceRevisions(ingest_pb2.ListTraceRevisionsRequest(), timeout=10)
    finally:
        blocker.close()
        services.stop()

    assert starting.value.code() == grpc.StatusCode.UNAVAILABLE, starting.value.details()
    assert "starting" in starting.value.details()
    assert list(listed.revisions) == []
    assert "Traceback" not in services.log("ingest"), services.log("ingest")


def test_a_lease_in_hand_is_renewed_and_an_expired_one_is_queued_again(postgres_url: str) -> None:
    labeler = serve_labeler(postgres_url, _nobody(), RuleLabeler(), start_worker=False)
    try:
        with transaction(labeler.sessions) as session:
            store.enqueue(session, OWNER, "held", 1)
            store.enqueue(session, OWNER, "orphaned", 1)
        with transaction(labeler.sessions) as session:
            ids = store.queued_ids(session, 10)
            assert len(store.claim(session, ids)) == 2
            for evaluation_id in ids:
                row = session.get(store.EvaluationRow, evaluation_id)
                row.updated_at = row.updated_at - timedelta(minutes=1)  # both leases ran out a minute ago
        held = next(evaluation_id for evaluation_id in ids if _trace_of(labeler, evaluation_id) == "held")

        with labeler.worker.leases.holding(held):
            revived = labeler.worker.leases.tick()

        assert revived == 1
        with transaction(labeler.sessions) as session:
            statuses = {row.trace_id: row.status for row in session.query(store.EvaluationRow)}
        assert statuses == {"held": "running", "orphaned": "queued"}
    finally:
        labeler.stop()


def test_another_owners_first_trace_is_claimed_in_the_next_batch_whatever_the_backlog(postgres_url: str) -> None:
    backlog = 5 * CLAIM_BATCH
    port = free_port()
    announcer = Announcer(
        LabelerClient(labeler_pb2_grpc.LabelerServiceStub(open_channel(f"127.0.0.1:{port}"))).announce_revisions
    )
    ingest, stop_ingest = serve_ingest(postgres_url, derive_title, announcer)
    labeler = serve_labeler(postgres_url, ingest, RuleLabeler(), start_worker=False, port=port)
    try:
        big = "\n".join(stash_line(f"big-{n}") for n in range(backlog))
        import_payload(ingest, big)
        small = import_payload(ingest, stash_line("small"), owner=OTHER_OWNER).trace_ids[0]
        _wait_queued(labeler, backlog + 1)

        labeler.worker.start()
        _succeeded(labeler.stub, small, owner=OTHER_OWNER)
        with transaction(labeler.sessions) as session:
            done_first = session.query(store.EvaluationRow).filter_by(owner_id=OWNER, status="succeeded").count()
    finally:
        labeler.stop()
        stop_ingest()

    assert done_first < CLAIM_BATCH  # first come, first served would have made it wait for all of them


def _wait_queued(labeler: Any, count: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with transaction(labeler.sessions) as session:
            if session.query(store.EvaluationRow).filter_by(status="queued").count() == count:
                return
        time.sleep(0.05)
    raise TimeoutError(f"{count} evaluations were not queued within 30s")


def _trace_of(labeler: Any, evaluation_id: str) -> str:
    with transaction(labeler.sessions) as session:
        return session.get(store.EvaluationRow, evaluation_id).trace_id


def _nobody() -> Any:
    return ingest_pb2_grpc.IngestServiceStub(open_channel(f"127.0.0.1:{free_port()}"))
