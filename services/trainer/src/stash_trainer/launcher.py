"""Launchers start the training worker for a job directory: here as a local subprocess.

The cluster profile launches the same worker as a Kubernetes Job; every launcher returns a
`RunningJob` the dispatcher can poll, wait for and kill.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Protocol

WORKER_MODULE = "stash_trainer.worker"


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
        """Start `python -m stash_trainer.worker <job_dir>` somewhere."""
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

    def launch(self, job_dir: Path) -> LocalProcess:
        """Start the worker on `job_dir`."""
        with (job_dir / "launcher.log").open("ab") as output:
            process = subprocess.Popen(
                [sys.executable, "-m", WORKER_MODULE, str(job_dir)],
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        return LocalProcess(job_dir, process)
