"""The local launcher runs a real subprocess per job and says how it ended; a job's files go through object storage."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from stash_common.jobs.launch import JobEnd, JobLaunch
from stash_common.jobs.local import LocalSubprocessLauncher
from stash_common.jobs.transfer import delete_files, download_files, job_key, upload_files
from stash_common.storage import LocalObjectStore
from support.sleeping_worker import is_alive, worker_pid

TESTS_DIR = Path(__file__).resolve().parents[1]
JOB = JobLaunch("train", "model-1", "job-1", "jobs/trainer/job-1")


def _ended(launcher: LocalSubprocessLauncher) -> JobEnd | None:
    worker = launcher.launch(JOB)
    deadline = time.monotonic() + 30
    while (end := worker.wait(0.2)) is None and time.monotonic() < deadline:
        pass
    return end


def _launcher(tmp_path: Path, exit_code: int) -> LocalSubprocessLauncher:
    env = {"PYTHONPATH": str(TESTS_DIR), "STASH_TEST_EXIT_CODE": str(exit_code)}
    return LocalSubprocessLauncher(tmp_path / "logs", env, "support.exiting_worker")


def test_a_worker_that_fails_is_named_by_its_exit_code_and_last_log_line(tmp_path: Path) -> None:
    launcher = _launcher(tmp_path, 3)

    end = _ended(launcher)

    assert end == JobEnd(
        False,
        "the worker exited with code 3; stash-train-job-1.log: worker for jobs/trainer/job-1 ends on purpose",
        3,
    )
    assert (tmp_path / "logs" / "stash-train-job-1.log").is_file()  # kept for whoever investigates


def test_a_worker_that_succeeds_leaves_no_log_and_a_duplicate_launch_is_the_same_worker(tmp_path: Path) -> None:
    launcher = _launcher(tmp_path, 0)

    end = _ended(launcher)

    assert end == JobEnd(True, exit_code=0)
    assert not (tmp_path / "logs" / "stash-train-job-1.log").exists()
    assert launcher.launch(JOB) is launcher.recover(JOB.name)
    assert _launcher(tmp_path, 0).recover(JOB.name) is None  # another process's subprocess cannot be found


@contextmanager
def busy_grpc_channel() -> Iterator[None]:
    """A gRPC server in this process and a channel calling it without a pause, as a service has while it launches."""
    server = grpc.server(futures.ThreadPoolExecutor(2))
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stop = threading.Event()

    def call() -> None:
        stub = health_pb2_grpc.HealthStub(channel)
        while not stop.is_set():
            stub.Check(health_pb2.HealthCheckRequest(), timeout=5)

    caller = threading.Thread(target=call)
    caller.start()
    try:
        yield
    finally:
        stop.set()
        caller.join()
        channel.close()
        server.stop(None)


def test_workers_launched_beside_live_grpc_channels_all_start(tmp_path: Path) -> None:
    """Python code between fork and exec (a preexec_fn) aborted about one such child in fifty (grpc/grpc#43055)."""
    env = {"PYTHONPATH": str(TESTS_DIR), "STASH_TEST_EXIT_CODE": "0"}
    launcher = LocalSubprocessLauncher(tmp_path / "logs", env, "support.exiting_worker")
    launches = [JobLaunch("train", f"model-{n}", f"job-{n}", f"jobs/trainer/job-{n}") for n in range(100)]

    with busy_grpc_channel():
        ends = [launcher.launch(launch).wait(30) for launch in launches]

    assert [end for end in ends if end != JobEnd(True, exit_code=0)] == []


def test_a_jobs_files_travel_through_object_storage_and_are_deleted_after(tmp_path: Path) -> None:
    objects = LocalObjectStore(tmp_path / "artifacts", "http://127.0.0.1:1", b"k" * 32)
    staging, scratch = tmp_path / "staging", tmp_path / "scratch"
    staging.mkdir()
    scratch.mkdir()
    (staging / "job.json").write_text("{}")
    key = job_key("trainer", "job-1")

    upload_files(objects, key, staging, ["job.json", "pairs.jsonl"])  # pairs.jsonl was not written: skipped
    found = download_files(objects, key, scratch, ["job.json", "pairs.jsonl"])
    delete_files(objects, key, ["job.json", "pairs.jsonl"])

    assert (key, found, (scratch / "job.json").read_text()) == ("jobs/trainer/job-1", ["job.json"], "{}")
    assert not objects.exists(f"{key}/job.json")


# What a service does, in its own process: launch a local worker from its dispatcher thread, then run on.
LAUNCHING_SERVICE = """
import sys, threading
from pathlib import Path
from stash_common.jobs.launch import JobLaunch
from stash_common.jobs.local import LocalSubprocessLauncher
from support.sleeping_worker import PID_VARIABLE
pids = Path(sys.argv[1])
launcher = LocalSubprocessLauncher(pids.parent / "logs", {PID_VARIABLE: str(pids)}, "support.sleeping_worker")
def dispatch():
    launcher.launch(JobLaunch("gepa", "run-1", "job-1", "jobs/gepa/job-1"))
    threading.Event().wait()
threading.Thread(target=dispatch, daemon=True).start()
threading.Event().wait()
"""


def test_a_service_killed_with_sigkill_takes_its_local_worker_with_it(tmp_path: Path) -> None:
    """Nothing else can find a local worker, so one left behind would only hold on to a job that was failed."""
    (tmp_path / "pids").mkdir()
    env = {**os.environ, "PYTHONPATH": str(TESTS_DIR)}
    service = subprocess.Popen([sys.executable, "-c", LAUNCHING_SERVICE, str(tmp_path / "pids")], env=env)
    pid = worker_pid(tmp_path / "pids", "job-1")
    running_before = is_alive(pid)

    service.kill()
    service.wait()
    deadline = time.monotonic() + 10
    while is_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)

    assert running_before
    assert not is_alive(pid)
