"""Launchers start a worker (training, scoring) on a job directory: here as a local subprocess.

Every worker is a module run as `python -m <module> <job_dir>`, so the training and scoring
services share one launcher and a deployment can swap it (a Kubernetes Job launcher is a later
issue); every launcher returns a `RunningJob` the dispatcher can poll, wait for and kill.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Protocol


class RunningJob(Protocol):
    """A launched worker."""

    job_dir: Path

    def poll(self) -> int | None:
        """The exit code once the worker has ended, else None."""
        ...

    def wait(self, timeout_s: float) -> int | None:
        """Wait up to `timeout_s` for the worker to end; its exit code, or None while it runs."""
        ...

    def kill(self) -> None:
        """Stop the worker now."""
        ...


class Launcher(Protocol):
    """Starts the worker for a prepared job directory."""

    def launch(self, job_dir: Path) -> RunningJob:
        """Start `python -m <the worker module> <job_dir>` somewhere."""
        ...


class LocalProcess:
    """The worker as a child process; its output goes to the job's worker.log."""

    def __init__(self, job_dir: Path, process: subprocess.Popen[bytes]) -> None:
        self.job_dir = job_dir
        self._process = process

    def poll(self) -> int | None:
        """The exit code once the worker has ended, else None."""
        return self._process.poll()

    def wait(self, timeout_s: float) -> int | None:
        """Wait up to `timeout_s`; the exit code, or None while the worker runs."""
        try:
            return self._process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        """Stop the worker now."""
        self._process.kill()
        self._process.wait()


class LocalSubprocessLauncher:
    """Runs each job as a local subprocess of this interpreter (the embedded profile)."""

    def __init__(self, worker_module: str) -> None:
        self.worker_module = worker_module

    def launch(self, job_dir: Path) -> LocalProcess:
        """Start the worker on `job_dir`."""
        with (job_dir / "launcher.log").open("ab") as output:
            process = subprocess.Popen(
                [sys.executable, "-m", self.worker_module, str(job_dir)],
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        return LocalProcess(job_dir, process)
