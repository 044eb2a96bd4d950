"""Launchers start a worker (training, scoring, GEPA) for a job whose files are in object storage.

Every worker is a module run as `python -m <module> --job <job key>`: it downloads the job's inputs
from object storage into its own scratch space, reports progress and its result to the owning
service over gRPC, and uploads its outputs (`stash_common.job_transfer`). A launcher only starts,
watches and stops it, so the services share this interface and a deployment picks the launcher by
configuration (`STASH_LAUNCHER`): local subprocesses here, Kubernetes Jobs in
`stash_common.kubernetes_launcher`. No service reads a worker's directory: a launcher reports only
how the worker ended (`JobEnd`), with the tail of its log when it failed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from stash_common.parent_death import die_with_parent_env

LOG_TAIL_CHARS = 500


@dataclass(frozen=True)
class JobLaunch:
    """One launch of a worker: its kind (`train`, `score`, `gepa`), the row it works for, and its job."""

    kind: str
    run_id: str  # the reward model, GEPA run or scoring job the launch works for
    job_id: str  # this launch: a retried run gets a new one
    job_key: str  # the object-storage prefix of the job's files

    @property
    def name(self) -> str:
        """The launch's name, deterministic from the job id (a Kubernetes Job name: ≤ 63 characters, DNS-safe)."""
        return f"stash-{self.kind}-{self.job_id}".lower()


@dataclass(frozen=True)
class JobEnd:
    """How a worker ended: whether it succeeded, and why not (its exit code or Job condition, its log's tail)."""

    succeeded: bool
    detail: str = ""
    exit_code: int | None = None  # the worker process's, when the launcher knows it


class RunningJob(Protocol):
    """A launched worker."""

    name: str

    def wait(self, timeout_s: float) -> JobEnd | None:
        """Wait up to `timeout_s` for the worker to end; how it ended, or None while it runs."""
        ...

    def kill(self) -> None:
        """Stop the worker now (a Kubernetes Job is deleted)."""
        ...


class Launcher(Protocol):
    """Starts workers and finds the ones an earlier process started."""

    # True when workers outlive the service that launched them (Kubernetes Jobs): stopping it leaves them running.
    detached: bool

    def launch(self, job: JobLaunch) -> RunningJob:
        """Start the worker of `job`."""
        ...

    def recover(self, name: str) -> RunningJob | None:
        """The worker launched as `name` by another process, or None when this launcher cannot know of it."""
        ...


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

    def __init__(self, worker_module: str, log_dir: Path, env: Mapping[str, str] | None = None) -> None:
        self.worker_module = worker_module
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
                    [sys.executable, "-m", self.worker_module, "--job", job.job_key],
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


def make_launcher(kind: Literal["local", "kubernetes"], worker_module: str, log_dir: Path) -> Launcher:
    """The launcher STASH_LAUNCHER names: local subprocesses, or Kubernetes Jobs configured by STASH_JOB_*."""
    if kind == "kubernetes":
        from stash_common.kubernetes_launcher import KubernetesLauncher  # the kubernetes client loads only here

        return KubernetesLauncher.from_environment(worker_module)
    return LocalSubprocessLauncher(worker_module, log_dir)


def last_log_line(text: str) -> str | None:
    """The last nonblank line of a worker's log, shortened to LOG_TAIL_CHARS."""
    lines = text.strip().splitlines()
    return lines[-1][-LOG_TAIL_CHARS:] if lines else None
