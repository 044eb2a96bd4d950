"""More evaluation workers, each in a process of its own, forked from the labeler as it starts.

Rule labelling is CPU-bound Python, so one process evaluates on one core at most: its reader, its evaluations
and its saves share one interpreter lock. With `STASH_LABELER_EVALUATION_PROCESSES=N` the labeler forks N-1
more processes before it makes any thread, channel or connection. Each runs an `EvaluationWorker` of its own
on connections of its own and claims batches from the same queue: the database decides who evaluates what,
as it does between replicas.

A forked process waits for its parent's first message, sent once the tables are migrated, then evaluates;
the parent forwards each wake-up of the evaluation topic to it through a pipe (a full pipe drops one: wake-ups
are hints, and the sweep finds what they pointed at). It ends when its parent closes the pipe or dies
(PR_SET_PDEATHSIG). One that dies is not forked again (forking a process with live gRPC channels is unsafe):
its claimed evaluations go back to the queue when their leases run out, and the other processes go on.
"""

from __future__ import annotations

import os
import select
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from stash_common.coordination import InProcessWakeups, Wakeups
from stash_common.parent_death import PARENT_VARIABLE, die_with_parent_env, follow_parent
from stash_labeler.evaluation_worker import WAKEUP_TOPIC, EvaluationWorker

log = structlog.get_logger()
WAKE = b"w"
STOP_WAIT_S = 10.0


@dataclass
class _Child:
    pid: int
    pipe: int  # the writing end; the child reads the other


class _Stop(Exception):
    """SIGTERM in a forked evaluation process."""


class EvaluationProcesses:
    """The labeler's forked evaluation processes, seen from the labeler itself."""

    def __init__(self) -> None:
        self._children: list[_Child] = []
        self._stopping = threading.Event()
        self._forwarder: threading.Thread | None = None

    def fork(self, extra: int, make_worker: Callable[[Wakeups], EvaluationWorker]) -> None:
        """Fork `extra` evaluation processes. Call it before the process makes a thread or a connection. Returns in
        the labeler; a forked process runs `make_worker`'s worker until the labeler ends, then exits."""
        os.environ.update(die_with_parent_env(signal.SIGTERM))
        for _ in range(extra):
            reading, writing = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(writing)
                for sibling in self._children:
                    os.close(sibling.pipe)
                _evaluate_until_the_labeler_ends(reading, make_worker)
            os.close(reading)
            os.set_blocking(writing, False)
            self._children.append(_Child(pid, writing))
        os.environ.pop(PARENT_VARIABLE)

    def start(self, wakeups: Wakeups) -> None:
        """Let the forked processes evaluate (the tables are migrated), and forward them every wake-up."""
        if not self._children:
            return
        subscription = wakeups.subscribe(WAKEUP_TOPIC)
        self._send()

        def forward() -> None:
            while not self._stopping.is_set():
                if subscription.wait(1.0):
                    self._send()
            subscription.close()

        self._forwarder = threading.Thread(target=forward, name="evaluation-process-wakeups", daemon=True)
        self._forwarder.start()

    def stop(self) -> None:
        """Close the pipes, which stops the forked processes, and wait for them (killed after STOP_WAIT_S)."""
        self._stopping.set()
        if self._forwarder is not None:
            self._forwarder.join()  # it writes to the pipes: they are closed after it ends (within a second)
        for child in self._children:
            os.close(child.pipe)
        for child in self._children:
            _reap(child.pid)
        self._children = []

    def _send(self) -> None:
        for child in list(self._children):
            try:
                os.write(child.pipe, WAKE)
            except BlockingIOError:
                pass  # its pipe is full of wake-ups it has yet to read
            except BrokenPipeError:
                _, status = os.waitpid(child.pid, 0)
                log.error("an evaluation process ended", pid=child.pid, exit_status=status)
                os.close(child.pipe)
                self._children.remove(child)


def _evaluate_until_the_labeler_ends(pipe: int, make_worker: Callable[[Wakeups], EvaluationWorker]) -> None:
    """The life of a forked evaluation process: never returns."""
    follow_parent()

    def stop(*_: object) -> None:
        raise _Stop

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C reaches the labeler, which stops us
    worker, status = None, 0
    try:
        if os.read(pipe, 1):  # nothing read: the labeler ended before its tables were ready
            worker = make_worker(InProcessWakeups())
            worker.start()
            log.info("evaluation process started", pid=os.getpid())
            while os.read(pipe, 4096):
                worker.wake()
    except _Stop:
        pass
    except Exception:
        log.exception("evaluation process failed", pid=os.getpid())
        status = 1
    finally:
        if worker is not None:
            worker.stop()
        os._exit(status)


def _reap(pid: int) -> None:
    """Wait for a forked process to end; kill it after STOP_WAIT_S."""
    ended = os.pidfd_open(pid)  # readable once the process has ended
    try:
        if not select.select([ended], [], [], STOP_WAIT_S)[0]:
            os.kill(pid, signal.SIGKILL)
    finally:
        os.close(ended)
    os.waitpid(pid, 0)
