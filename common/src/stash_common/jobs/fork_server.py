"""`python -m stash_common.jobs.fork_server <kind> <entry>`: imports a kind's libraries once, then forks each worker.

Most of a local worker's start is importing torch and transformers (4 s of CPU; a GEPA worker's litellm and
gepa, 7 s). The local launcher (`stash_common.jobs.local`) starts one fork server per kind at its first job;
the server imports what `WorkerKind.preload` names (for the real entry point only: a stand-in entry in a test
needs none of it), then forks a worker per job, which runs `entry` as `python -m <entry> <argv…>` would (and
is shown so by `ps`, with setproctitle). Only
the first job of a kind pays for the imports; a later one starts in milliseconds. Nothing has used torch in
the server when it forks (no thread pool, no CUDA context), so each worker starts as a fresh process would.

Its environment is the workers' (the launcher's), with the kind's defaults set before anything is imported:
OpenMP reads OMP_NUM_THREADS and OMP_WAIT_POLICY once, when torch loads it.

The launcher talks to it over its standard input and output, one JSON object per line. Requests:
`{"start": name, "argv": [...], "log": path}` forks the worker `name` with its output appended to `log`;
`{"kill": name}` sends it SIGKILL. One event per worker: `{"ended": name, "code": exit code}` (a signal's
number negated, as `subprocess` reports it). The server ends when its standard input closes; it dies with
the thread that started it and each worker dies with the server (`stash_common.parent_death`), so a
service that dies takes its workers with it as before.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import runpy
import selectors
import signal
import sys
import traceback
from collections.abc import Sequence
from typing import Any, BinaryIO, NoReturn

import orjson
import setproctitle

from stash_common.jobs.kinds import KINDS
from stash_common.jobs.launch import WORKER_ENTRY
from stash_common.parent_death import die_with_parent_env, follow_parent

USAGE = f"usage: python -m stash_common.jobs.fork_server {{{','.join(KINDS)}}} <entry module>"


class ForkServer:
    """Forks the workers it is asked for and reports when each starts and ends."""

    def __init__(self, entry: str, events: BinaryIO) -> None:
        self.entry = entry
        self.events = events
        self.workers: dict[str, int] = {}  # name -> pid, until reaped
        self.worker_env = die_with_parent_env(signal.SIGKILL)  # this thread's: the workers die with the server
        self.selector = selectors.DefaultSelector()
        # SIGCHLD wakes the loop through a pipe (Python's wakeup fd), so ending workers are reaped between requests.
        self.wakeup_read, self.wakeup_write = os.pipe()
        for end in (self.wakeup_read, self.wakeup_write):
            os.set_blocking(end, False)

    def serve(self) -> None:
        """Answer requests until standard input closes."""
        signal.set_wakeup_fd(self.wakeup_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.selector.register(self.wakeup_read, selectors.EVENT_READ)
        self.selector.register(sys.stdin.fileno(), selectors.EVENT_READ)
        pending = b""
        while True:
            for key, _ in self.selector.select():
                if key.fd == self.wakeup_read:
                    self._reap()
                    continue
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    return  # the launcher is gone: its service is stopping
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    self._handle(orjson.loads(line))

    def _handle(self, request: dict[str, Any]) -> None:
        if "kill" in request:
            # Only a worker not reaped yet is listed, and its pid stays its own until this loop reaps it.
            if (pid := self.workers.get(request["kill"])) is not None:
                os.kill(pid, signal.SIGKILL)
            return
        name = request["start"]
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            self._become_worker(request["argv"], request["log"])
        self.workers[name] = pid

    def _reap(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while os.read(self.wakeup_read, 512):
                pass
        names = {pid: name for name, pid in self.workers.items()}
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return  # no child left
            if pid == 0:
                return
            if (name := names.get(pid)) is not None:
                del self.workers[name]
                self._send({"ended": name, "code": os.waitstatus_to_exitcode(status)})

    def _send(self, event: dict[str, Any]) -> None:
        self.events.write(orjson.dumps(event) + b"\n")
        self.events.flush()

    def _become_worker(self, argv: Sequence[str], log: str) -> NoReturn:
        """In the forked child: drop the server's signals and descriptors, write to `log`, run the entry as
        `python -m <entry>` would."""
        code = 1
        try:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            self.selector.close()
            for descriptor in (self.wakeup_read, self.wakeup_write):
                os.close(descriptor)
            self.events.close()
            os.environ.update(self.worker_env)  # the entry's follow_parent() asks for the signal
            output = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(output, 1)
            os.dup2(output, 2)
            os.close(output)
            nothing = os.open(os.devnull, os.O_RDONLY)
            os.dup2(nothing, 0)
            os.close(nothing)
            # What `ps` shows: the command the worker would have been started with, not the server's.
            setproctitle.setproctitle(" ".join([sys.executable, "-m", self.entry, *argv]))
            sys.argv = [self.entry, *argv]
            runpy.run_module(self.entry, run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exit:
            code = _exit_code(exit)
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)


def _exit_code(exit: SystemExit) -> int:
    """The exit code `python` gives a SystemExit: 0 for None, the number, or 1 after printing a message."""
    if exit.code is None or isinstance(exit.code, int):
        return exit.code or 0
    print(exit.code, file=sys.stderr)
    return 1


def main(argv: Sequence[str]) -> int:
    """Preload the kind's libraries and serve; 2 on bad usage."""
    if len(argv) != 2 or argv[0] not in KINDS:
        print(USAGE, file=sys.stderr)
        return 2
    kind, entry = KINDS[argv[0]], argv[1]
    kind.prepare_environment()
    # Events go over a copy of standard output; what the server itself prints goes to its log (standard error).
    events = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    for module in kind.preload if entry == WORKER_ENTRY else ():
        importlib.import_module(module)
    ForkServer(entry, events).serve()
    return 0


if __name__ == "__main__":
    follow_parent()  # the server, and with it every worker, ends with the thread that started it
    sys.exit(main(sys.argv[1:]))
