"""Children that die with the process that started them, asked for by the child itself.

A parent puts `die_with_parent_env(signal)` into a child's environment; the child calls
`follow_parent()` before anything else, which asks Linux (prctl PR_SET_PDEATHSIG) for that signal
when the thread that launched it ends, and sends it at once if that thread is already gone (then
Linux has handed the child to another thread of the process, or to init, and would never signal).

Why not a `preexec_fn` between fork and exec: Python code in a forked child of a process with live
gRPC channels runs gRPC's fork handlers, and with grpcio ≥ 1.80 about one child in fifty aborts
(SIGABRT on `epoll_wait: Bad file descriptor`, or SIGSEGV) before it reaches exec
(grpc/grpc#43055). Without a `preexec_fn`, `subprocess` forks and execs without running Python in
the child. Elsewhere than Linux this does nothing.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
from pathlib import Path

PARENT_VARIABLE = "STASH_DIE_WITH_PARENT"  # "<parent pid>:<launching thread id>:<signal name>"
PR_SET_PDEATHSIG = 1  # prctl(2): the signal the calling process gets when its parent thread ends


def die_with_parent_env(signum: signal.Signals) -> dict[str, str]:
    """The environment entry that makes a child started from this thread get `signum` when the thread ends
    (Linux follows the launching thread, not the process: a service launches from a long-lived thread)."""
    return {PARENT_VARIABLE: f"{os.getpid()}:{threading.get_native_id()}:{signum.name}"}


def follow_parent() -> None:
    """Ask for the signal `die_with_parent_env` named; the entry is removed so no grandchild inherits it."""
    requested = os.environ.pop(PARENT_VARIABLE, "")
    if not requested or not sys.platform.startswith("linux"):
        return
    parent_pid, thread_id, name = requested.split(":")
    signum = signal.Signals[name]
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signum)
    if not Path(f"/proc/{parent_pid}/task/{thread_id}").exists():  # it ended before the request took effect
        os.kill(os.getpid(), signum)
