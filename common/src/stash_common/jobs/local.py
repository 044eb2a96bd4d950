"""LocalSubprocessLauncher: each worker as a child process of the service (the embedded profile)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path

from stash_common.jobs.launch import WORKER_ENTRY, JobEnd, JobLaunch, last_log_line, worker_command
from stash_common.parent_death import die_with_parent_env


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
    """The worker as a child process; its output goes to the launcher's log file for it."""

    def __init__(self, name: str, process: subprocess.Popen[bytes], log_file: Path) -> None:
        self.name = name
        self._process = process
        self._log_file = log_file

    def wait(self, timeout_s: float) -> JobEnd | None:
        """Wait up to `timeout_s`; how the worker ended, or None while it runs."""
        try:
            code = self._process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return None
        if code == 0:
            self._log_file.unlink(missing_ok=True)
            return JobEnd(True, exit_code=0)
        last_line = last_log_line(self._log_file.read_text(encoding="utf-8", errors="replace"))
        detail = f"the worker exited with code {code}"
        return JobEnd(False, f"{detail}; {self._log_file.name}: {last_line}" if last_line else detail, code)

    def kill(self) -> None:
        """Stop the worker now."""
        self._process.kill()
        self._process.wait()


class LocalSubprocessLauncher:
    """Runs each job as a local subprocess of this interpreter (the embedded profile).

    `env` overrides variables of this process's environment for the worker (which otherwise sees the
    same object storage settings as the service); the worker's output goes to `log_dir/<name>.log`,
    which is removed when it succeeds. The worker is killed when the thread that launched it ends
    (Linux's parent-death signal, which every worker asks for with `stash_common.parent_death`,
    follows the launching thread): a service launches from its dispatcher's long-lived thread, and
    a service that dies takes its workers with it. A service killed with SIGKILL cannot stop its
    workers, and no other process can find a local worker (`recover`), so one left behind would
    only hold on to its job after a live replica has failed the job's row (its lease ran out).
    """

    detached = False

    def __init__(self, log_dir: Path, env: Mapping[str, str] | None = None, entry: str = WORKER_ENTRY) -> None:
        self.entry = entry  # the module the worker runs (a stand-in worker in tests)
        self.log_dir = log_dir
        self.env = dict(env or {})
        self._started: dict[str, LocalProcess] = {}
        self._lock = threading.Lock()

    def launch(self, job: JobLaunch) -> LocalProcess:
        """Start the worker of `job`; a second launch of the same job returns the first one's process."""
        with self._lock:
            if job.name in self._started:
                return self._started[job.name]
            self.log_dir.mkdir(parents=True, exist_ok=True)
            log_file = self.log_dir / f"{job.name}.log"
            with log_file.open("ab") as output:
                process = subprocess.Popen(
                    worker_command(job, sys.executable, self.entry),
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env={**os.environ, **self.env, **die_with_parent_env(signal.SIGKILL)},
                )
            self._started[job.name] = LocalProcess(job.name, process, log_file)
            return self._started[job.name]

    def recover(self, name: str) -> LocalProcess | None:
        """This process's own worker `name`; a subprocess of an earlier process cannot be found."""
        with self._lock:
            return self._started.get(name)
