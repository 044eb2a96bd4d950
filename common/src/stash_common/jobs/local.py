"""LocalSubprocessLauncher: each worker as a local process, forked by its kind's fork server (the embedded profile)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from stash_common.jobs.launch import WORKER_ENTRY, JobEnd, JobLaunch, last_log_line
from stash_common.parent_death import die_with_parent_env

FORK_SERVER = "stash_common.jobs.fork_server"
# A fork server holds its kind's libraries in memory (torch and transformers: about 0.4 GB); it exits when it has
# had no worker for this long, and the next job starts another.
FORK_SERVER_IDLE_S = 600.0


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask, which containers narrow)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def shared_cpus_env(workers: int) -> dict[str, str]:
    """The OMP_NUM_THREADS of each of `workers` local workers running at once: an equal share of the usable
    CPUs, at least one; nothing when OMP_NUM_THREADS is set already (the worker then keeps it).

    A torch worker uses a thread per usable CPU, and threads that outnumber the cores spin waiting for each
    other: two scoring workers on 2 cores scored 7 actions/s each with 2 threads, 26 with 1 (MiniLM).
    """
    if "OMP_NUM_THREADS" in os.environ:
        return {}
    return {"OMP_NUM_THREADS": str(max(1, usable_cpus() // workers))}


class LocalProcess:
    """A worker process; its output goes to the launcher's log file for it."""

    def __init__(self, name: str, server: ForkServerProcess, log_file: Path) -> None:
        self.name = name
        self.log_file = log_file
        self._server = server
        self._ended = threading.Event()
        self._end = JobEnd(False)

    def wait(self, timeout_s: float) -> JobEnd | None:
        """Wait up to `timeout_s`; how the worker ended, or None while it runs."""
        return self._end if self._ended.wait(timeout_s) else None

    def kill(self) -> None:
        """Stop the worker now."""
        self._server.kill(self.name)
        self._ended.wait()

    def exited(self, code: int) -> None:
        """The worker exited with `code`: a success removes its log, a failure is named by its log's last line."""
        if code == 0:
            self.log_file.unlink(missing_ok=True)
            self._settle(JobEnd(True, exit_code=0))
            return
        self._settle(JobEnd(False, _with_log_tail(f"the worker exited with code {code}", self.log_file), code))

    def lost(self, detail: str) -> None:
        """The fork server ended before reporting the worker's end (the worker died with it)."""
        self._settle(JobEnd(False, detail))

    def _settle(self, end: JobEnd) -> None:
        self._end = end
        self._ended.set()


class ForkServerProcess:
    """One kind's fork server (`stash_common.jobs.fork_server`) and the workers it runs for this launcher."""

    def __init__(self, kind: str, entry: str, log_dir: Path, env: Mapping[str, str]) -> None:
        self.kind = kind
        self.log_file = log_dir / f"stash-{kind}-fork-server.log"
        self.closed = False
        self._workers: dict[str, LocalProcess] = {}
        self._lock = threading.Lock()
        self._idle: threading.Timer | None = None
        with self.log_file.open("ab") as log:
            self._process = subprocess.Popen(
                [sys.executable, "-m", FORK_SERVER, kind, entry],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=dict(env),
            )
        threading.Thread(target=self._read_events, name=f"{kind}-fork-server", daemon=True).start()

    def start(self, name: str, argv: list[str], log_file: Path) -> LocalProcess:
        """Ask for the worker `name`; OSError when the server has ended (the launcher starts another)."""
        worker = LocalProcess(name, self, log_file)
        with self._lock:
            if self.closed:
                raise OSError(f"the {self.kind} fork server has ended")
            self._cancel_idle()
            self._workers[name] = worker
            self._send({"start": name, "argv": argv, "log": str(log_file)})
        return worker

    def kill(self, name: str) -> None:
        """Ask for SIGKILL to the worker `name` (nothing when it has ended)."""
        with self._lock:
            self._send({"kill": name})

    def _send(self, request: dict[str, Any]) -> None:
        """Write a request (the lock held); a server that has gone is ended by its reader, not here."""
        stdin = self._process.stdin
        assert stdin is not None
        with contextlib.suppress(OSError, ValueError):  # ValueError: closed when it was idle
            stdin.write(orjson.dumps(request) + b"\n")
            stdin.flush()

    def _read_events(self) -> None:
        stdout = self._process.stdout
        assert stdout is not None
        for line in stdout:
            try:
                event = orjson.loads(line)
            except orjson.JSONDecodeError:
                break  # cut off: the server was killed while writing
            with self._lock:
                worker = self._workers.pop(event["ended"])
                if not self._workers and not self.closed:
                    self._idle = threading.Timer(FORK_SERVER_IDLE_S, self._close_when_idle)
                    self._idle.daemon = True
                    self._idle.start()
            worker.exited(event["code"])
        code = self._process.wait()
        with self._lock:
            self.closed = True
            self._cancel_idle()
            lost, self._workers = list(self._workers.values()), {}
        detail = _with_log_tail(f"the {self.kind} fork server exited with code {code}", self.log_file)
        for worker in lost:
            worker.lost(detail)

    def _close_when_idle(self) -> None:
        """End the server (its standard input closes) unless a worker started meanwhile."""
        with self._lock:
            if self._workers or self.closed:
                return
            self.closed = True
            stdin = self._process.stdin
            assert stdin is not None
            stdin.close()

    def _cancel_idle(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None


def _with_log_tail(detail: str, log_file: Path) -> str:
    """`detail`, then the log's name and its last line when it has one."""
    try:
        last_line = last_log_line(log_file.read_text(encoding="utf-8", errors="replace"))
    except FileNotFoundError:
        last_line = None
    return f"{detail}; {log_file.name}: {last_line}" if last_line else detail


class LocalSubprocessLauncher:
    """Runs each job as a local process (the embedded profile), forked by its kind's fork server.

    The first job of a kind starts the kind's fork server (`stash_common.jobs.fork_server`), which imports
    the kind's libraries once; each job's worker is a fork of it, so only that first job waits for torch
    and transformers to load. `env` overrides variables of this process's environment for the server and
    its workers (which otherwise see the same object storage settings as the service); a worker's output
    goes to `log_dir/<name>.log`, which is removed when it succeeds, the server's to
    `log_dir/stash-<kind>-fork-server.log`. The server, and with it every worker, is killed when the thread
    that started it ends (Linux's parent-death signal, which follows the launching thread): a service
    launches from its dispatcher's long-lived thread, and a service that dies takes its workers with it.
    A service killed with SIGKILL cannot stop its workers otherwise, and no other process can find a local
    worker (`recover`), so one left behind would only hold on to its job after a live replica has failed
    the job's row (its lease ran out).
    """

    detached = False

    def __init__(self, log_dir: Path, env: Mapping[str, str] | None = None, entry: str = WORKER_ENTRY) -> None:
        self.entry = entry  # the module the worker runs (a stand-in worker in tests)
        self.log_dir = log_dir
        self.env = dict(env or {})
        self._started: dict[str, LocalProcess] = {}
        self._servers: dict[str, ForkServerProcess] = {}
        self._lock = threading.Lock()

    def launch(self, job: JobLaunch) -> LocalProcess:
        """Start the worker of `job`; a second launch of the same job returns the first one's process."""
        with self._lock:
            if job.name in self._started:
                return self._started[job.name]
            self.log_dir.mkdir(parents=True, exist_ok=True)
            argv, log_file = [job.kind, "--job", job.job_key], self.log_dir / f"{job.name}.log"
            try:
                worker = self._server(job.kind).start(job.name, argv, log_file)
            except OSError:  # it ended between the check and the request: start another
                del self._servers[job.kind]
                worker = self._server(job.kind).start(job.name, argv, log_file)
            self._started[job.name] = worker
            return worker

    def recover(self, name: str) -> LocalProcess | None:
        """This process's own worker `name`; a worker of an earlier process cannot be found."""
        with self._lock:
            return self._started.get(name)

    def _server(self, kind: str) -> ForkServerProcess:
        server = self._servers.get(kind)
        if server is None or server.closed:
            env = {**os.environ, **self.env, **die_with_parent_env(signal.SIGKILL)}
            server = self._servers[kind] = ForkServerProcess(kind, self.entry, self.log_dir, env)
        return server
