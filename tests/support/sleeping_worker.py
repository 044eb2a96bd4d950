"""A stand-in worker (`python -m support.sleeping_worker <kind> --job <key>`), alive but slow: it never ends.

It writes its process id to `$STASH_TEST_PID_DIR/<last part of the job key>.pid` once it runs, so a
test can kill it with SIGKILL, then sleeps until it is killed.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

from stash_common.parent_death import follow_parent

PID_VARIABLE = "STASH_TEST_PID_DIR"


def worker_pid(pid_dir: Path, job_id: str, timeout_s: float = 30.0) -> int:
    """The pid of the sleeping worker of `job_id` once it has written it."""
    pid_file = pid_dir / f"{job_id}.pid"
    deadline = time.monotonic() + timeout_s
    while not pid_file.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the worker of {job_id} did not start within {timeout_s}s")
        time.sleep(0.05)
    return int(pid_file.read_text())


def is_alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead but not yet reaped by its parent, counts as dead)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


if __name__ == "__main__":
    follow_parent()  # as every worker does first
    pid_file = Path(os.environ[PID_VARIABLE]) / f"{sys.argv[-1].rsplit('/', 1)[-1]}.pid"
    pid_file.with_suffix(".tmp").write_text(str(os.getpid()))
    pid_file.with_suffix(".tmp").rename(pid_file)  # whole, or not there at all
    threading.Event().wait()
