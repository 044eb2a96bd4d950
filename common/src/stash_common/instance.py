"""One running stack per data directory, and the stack id by which its processes know each other.

`stash-rm up` (and `demo`) hold an exclusive lock on `<data dir>/run/stack.lock` for the life of the stack,
recording their pid and the stack id they generated; in the embedded profile each service also holds
`<data dir>/run/<service>.lock` while it runs, since its SQLite file lives there and two processes of one
service on one file would each take the other's rows for their own. A lock held by a running process is
refused with a message naming that process. The kernel releases a lock when its process ends, even by
SIGKILL, so a crash never leaves a stale one behind.

A port refused at start (`stash_common.listeners`) keeps a second stack off the first one's ports; the
stack id covers what a port cannot: a peer address that points at another stack's service. Every gRPC
service reports its id in the initial metadata of each health check (`STACK_ID_METADATA`), and whoever
checks a peer with an expected id (`up`, the gateway's readiness, `stash-rm status`) counts a service
reporting another id as not its own. In a cluster the id names the Helm release.
"""

from __future__ import annotations

import fcntl
import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from stash_common.errors import ConfigError

STACK_ID_METADATA = "stash-stack-id"
STACK = "stack"  # the lock `up` and `demo` hold, beside one per service


class DataDirInUse(ConfigError):
    """The data directory is already served by a running stack or service; the message names which."""


@dataclass
class DataDirLock:
    """An exclusive lock on a file in the data directory, held until `release` or the process's end."""

    path: Path
    handle: IO[str]

    def release(self) -> None:
        """Give the lock up (closing the file releases it)."""
        _held.remove(self)
        self.handle.close()


# Locks held for the life of the process: a lock whose file object were collected would be released with it.
_held: list[DataDirLock] = []


def new_stack_id() -> str:
    """A fresh stack id, for a stack that `up` starts."""
    return uuid.uuid4().hex


def lock_path(data_dir: Path, holder: str) -> Path:
    """The lock file of `holder` (STACK, or a service's name) in a data directory."""
    return data_dir / "run" / f"{holder}.lock"


def hold(data_dir: Path, holder: str, stack_id: str) -> DataDirLock:
    """Take `holder`'s lock in `data_dir` for this process's life; DataDirInUse while another process holds it."""
    path = lock_path(data_dir, holder)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = path.open("a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        record = _record(handle)
        handle.close()
        raise DataDirInUse(_refusal(data_dir, holder, record)) from None
    handle.truncate(0)
    handle.write(json.dumps({"pid": os.getpid(), "holder": holder, "stack_id": stack_id}))
    handle.flush()
    lock = DataDirLock(path, handle)
    _held.append(lock)
    return lock


def check_unheld(data_dir: Path, holder: str) -> None:
    """DataDirInUse, naming the holder, while a live process holds `holder`'s lock in `data_dir`."""
    record = running_holder(data_dir, holder)
    if record is not None:
        raise DataDirInUse(_refusal(data_dir, holder, record))


def running_holder(data_dir: Path, holder: str) -> dict[str, Any] | None:
    """What a live holder of the lock recorded (pid, holder, stack_id); None when nothing holds it."""
    path = lock_path(data_dir, holder)
    if not path.exists():
        return None
    with path.open() as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _record(handle)
    return None  # the file outlived its holder


def _record(handle: IO[str]) -> dict[str, Any]:
    handle.seek(0)
    try:
        record = json.loads(handle.read() or "{}")
    except json.JSONDecodeError:  # the holder is writing it this very moment
        return {}
    return record if isinstance(record, dict) else {}


def _refusal(data_dir: Path, holder: str, record: dict[str, Any]) -> str:
    pid = record.get("pid", "?")
    what = "a running stack (stash-rm up)" if record.get("holder", holder) == STACK else f"a running {holder} service"
    return (
        f"the data directory {data_dir} is already served by {what}, pid {pid}; stop it, or choose another"
        " directory with --data-dir or STASH_DATA_DIR"
    )
