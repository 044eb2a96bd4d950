"""What a launcher is: it starts a worker (training, scoring, GEPA) for a job whose files are in object storage.

Every worker runs as `python -m stash_common.jobs.worker <kind> --job <job key>` (`worker_command`): it
downloads the job's inputs from object storage into its own scratch space, reports progress and its
result to the owning service over gRPC, and uploads its outputs (`stash_common.jobs.transfer`). A
launcher only starts, watches and stops it, so the services share this interface and a deployment
picks the launcher by configuration (`STASH_LAUNCHER`, `stash_common.jobs.launchers`): local
subprocesses (`stash_common.jobs.local`) or Kubernetes Jobs (`stash_common.jobs.kubernetes`). No
service reads a worker's directory: a launcher reports only how the worker ended (`JobEnd`), with
the tail of its log when it failed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

LOG_TAIL_CHARS = 500
WORKER_ENTRY = "stash_common.jobs.worker"  # the module every worker process runs


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


def worker_command(job: JobLaunch, python: str, entry: str = WORKER_ENTRY) -> list[str]:
    """The command line of `job`'s worker: `<python> -m <entry> <kind> --job <job key>`."""
    return [python, "-m", entry, job.kind, "--job", job.job_key]


def last_log_line(text: str) -> str | None:
    """The last nonblank line of a worker's log, shortened to LOG_TAIL_CHARS."""
    lines = text.strip().splitlines()
    return lines[-1][-LOG_TAIL_CHARS:] if lines else None
