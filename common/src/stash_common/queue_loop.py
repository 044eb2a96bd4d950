"""QueueLoop: a background thread that drains a database-backed queue when woken and sweeps on a timer.

The database rows are the queue and the truth. A wake-up (in-process, or a Redis stream that every
replica reads) only makes the loop look early; the periodic sweep recovers whatever a lost wake-up
or a crashed worker left behind. Neither a failing pass nor an unreachable Redis stops the loop.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from time import monotonic

import structlog

from stash_common.coordination import Subscription, Wakeups

log = structlog.get_logger()


class QueueLoop:
    """Runs `sweep` every `sweep_interval_s` and `drain` after every wake-up, until stopped."""

    def __init__(
        self,
        name: str,
        wakeups: Wakeups,
        topic: str,
        drain: Callable[[], object],
        sweep: Callable[[], object],
        sweep_interval_s: float,
    ) -> None:
        self.name = name
        self.wakeups = wakeups
        self.topic = topic
        self.drain = drain
        self.sweep = sweep
        self.sweep_interval_s = sweep_interval_s
        self.stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        """Start the background thread."""
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Let the pass in hand finish, then end the thread."""
        self.stopping.set()
        if self._thread.is_alive():
            self.wake()
            self._thread.join(timeout_s)

    def wake(self) -> None:
        """Tell every replica's loop that something was queued."""
        self.wakeups.notify(self.topic, "queued")

    def _run(self) -> None:
        subscription = self.wakeups.subscribe(self.topic)
        next_sweep = 0.0
        try:
            while not self.stopping.is_set():
                if monotonic() >= next_sweep:
                    self._guarded(self.sweep)
                    next_sweep = monotonic() + self.sweep_interval_s
                self._guarded(self.drain)
                self._wait(subscription, max(0.0, min(self.sweep_interval_s, next_sweep - monotonic())))
        finally:
            subscription.close()

    def _wait(self, subscription: Subscription, timeout_s: float) -> None:
        try:
            subscription.wait(timeout_s)
        except Exception:  # Redis away: poll until it answers again
            log.exception("wake-ups unavailable; polling", loop=self.name)
            self.stopping.wait(min(timeout_s, 1.0))

    def _guarded(self, work: Callable[[], object]) -> None:
        try:
            work()
        except Exception:  # a database or peer outage must not end the loop; the next pass retries
            log.exception("background pass failed", loop=self.name)
