"""The local launcher runs each job as a real process forked by its kind's fork server and says how it ended; a job's
files go through object storage."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

import stash_common.jobs.local
from stash_common.jobs.launch import JobEnd, JobLaunch
from stash_common.jobs.local import LocalSubprocessLauncher
from stash_common.jobs.transfer import delete_files, download_files, job_key, upload_files
from stash_common.storage import LocalObjectStore
from support.sleeping_worker import PID_VARIABLE, is_alive, worker_pid

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


def _parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _command_line(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]


def _shown_command(pid: int) -> str:
    """A forked worker's command line: the title its fork server gave it, padded with NULs."""
    return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()


def _sleeping_workers(tmp_path: Path) -> LocalSubprocessLauncher:
    (tmp_path / "pids").mkdir()
    env = {"PYTHONPATH": str(TESTS_DIR), PID_VARIABLE: str(tmp_path / "pids")}
    return LocalSubprocessLauncher(tmp_path / "logs", env, "support.sleeping_worker")


def _gone_within(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while is_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not is_alive(pid)


def test_each_kind_has_one_fork_server_that_forks_its_workers_and_a_killed_worker_ends_with_minus_nine(
    tmp_path: Path,
) -> None:
    launcher = _sleeping_workers(tmp_path)
    jobs = [
        JobLaunch("train", "model-1", "job-1", "jobs/trainer/job-1"),
        JobLaunch("train", "model-2", "job-2", "jobs/trainer/job-2"),
        JobLaunch("gepa", "run-1", "job-3", "jobs/gepa/job-3"),
    ]
    workers = [launcher.launch(job) for job in jobs]
    pids = [worker_pid(tmp_path / "pids", job.job_id) for job in jobs]
    servers = [_parent_of(pid) for pid in pids]
    shown = _shown_command(pids[0])
    for worker in workers:
        worker.kill()

    assert servers[0] == servers[1] != servers[2]
    assert [_command_line(server)[1:] for server in (servers[0], servers[2])] == [
        ["-m", "stash_common.jobs.fork_server", "train", "support.sleeping_worker"],
        ["-m", "stash_common.jobs.fork_server", "gepa", "support.sleeping_worker"],
    ]
    assert shown == f"{sys.executable} -m support.sleeping_worker train --job jobs/trainer/job-1"  # what ps shows
    assert [worker.wait(0) for worker in workers] == [JobEnd(False, "the worker exited with code -9", -9)] * 3


def test_a_forked_worker_runs_its_entry_as_python_m_with_its_kinds_environment(tmp_path: Path) -> None:
    launcher = LocalSubprocessLauncher(tmp_path / "logs", {"PYTHONPATH": str(TESTS_DIR)}, "support.printing_worker")

    end = launcher.launch(JobLaunch("gepa", "run-1", "job-1", "jobs/gepa/job-1")).wait(30)

    printed = "__main__ ['gepa', '--job', 'jobs/gepa/job-1'] {'HF_HUB_OFFLINE': '1', 'OMP_WAIT_POLICY': 'PASSIVE'}"
    assert end == JobEnd(False, f"the worker exited with code 1; stash-gepa-job-1.log: {printed}", 1)


def test_a_fork_server_that_dies_takes_its_workers_and_the_next_job_starts_another(tmp_path: Path) -> None:
    launcher = _sleeping_workers(tmp_path)
    first = launcher.launch(JOB)
    pid = worker_pid(tmp_path / "pids", JOB.job_id)
    server = _parent_of(pid)

    os.kill(server, signal.SIGKILL)
    end = first.wait(30)
    second_job = JobLaunch("train", "model-2", "job-2", "jobs/trainer/job-2")
    second = launcher.launch(second_job)
    second_server = _parent_of(worker_pid(tmp_path / "pids", second_job.job_id))
    second.kill()

    assert end == JobEnd(False, "the train fork server exited with code -9")
    assert _gone_within(pid, 10)  # its parent-death signal
    assert second_server != server


def test_an_idle_fork_server_exits_and_the_next_job_starts_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stash_common.jobs.local, "FORK_SERVER_IDLE_S", 0.1)
    launcher = _sleeping_workers(tmp_path)
    first = launcher.launch(JOB)
    server = _parent_of(worker_pid(tmp_path / "pids", JOB.job_id))

    first.kill()
    second_job = JobLaunch("train", "model-2", "job-2", "jobs/trainer/job-2")
    idle_server_gone = _gone_within(server, 10)
    second = launcher.launch(second_job)
    second_server = _parent_of(worker_pid(tmp_path / "pids", second_job.job_id))
    second.kill()

    assert idle_server_gone
    assert second_server != server


def test_the_real_entry_point_forks_from_a_server_that_has_loaded_torch(tmp_path: Path) -> None:
    marker = f"STASH_TEST_MARKER={tmp_path}"
    launcher = LocalSubprocessLauncher(tmp_path / "logs", dict([marker.split("=", 1)]))

    end = launcher.launch(JobLaunch("score", "batch-1", "job-1", "jobs/scorer/job-1")).wait(120)
    servers = [pid for pid in _pids() if marker.encode() in _environment(pid)]

    assert end is not None and not end.succeeded  # no object storage is configured for it
    assert [_command_line(pid)[1:] for pid in servers] == [
        ["-m", "stash_common.jobs.fork_server", "score", "stash_common.jobs.worker"]
    ]
    assert "libtorch_cpu.so" in Path(f"/proc/{servers[0]}/maps").read_text()


def _pids() -> list[int]:
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]


def _environment(pid: int) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return []  # ended meanwhile, or not ours to read
