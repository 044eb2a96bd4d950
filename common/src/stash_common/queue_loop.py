"""QueueLoop: a background thread that drains a database-backed queue when woken and sweeps on a timer.

The database rows are the queue and the truth. A wake-up (in-process, or a Redis stream that every
replica reads) only makes the loop look early; the periodic sweep recovers whatever a lost wake-up
or a crashed worker left behind. Neither a failing pass nor an unreachable Redis stops the loop.

Services start in any order, so a pass that finds a peer or a store out of reach (`Unavailable`, a database
or Redis outage) is no error: it is logged at info level and the whole pass is tried again after a backoff
(0.5 s, doubling up to the sweep interval), not only at the next sweep. While Redis is away the loop polls the
table every second instead of waiting for wake-ups; the outage is logged once, when it begins, not every second.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from time import monotonic

import structlog

from stash_common.coordination import Subscription, Wakeups
from stash_common.errors import Unavailable
from stash_common.outages import store_outage

log = structlog.get_logger()
FIRST_RETRY_S = 0.5


class Backoff:
    """Delays that double from `first_s` up to `longest_s`, until `reset`."""

    def __init__(self, first_s: float, longest_s: float) -> None:
        self.first_s = first_s
        self.longest_s = longest_s
        self._next_s = first_s

    def next_delay(self) -> float:
        """The delay to wait now; the one after it is twice as long (at most `longest_s`)."""
        delay = min(self._next_s, self.longest_s)
        self._next_s = min(self._next_s * 2, self.longest_s)
        return delay

    def reset(self) -> None:
        """Start again from `first_s`."""
        self._next_s = self.first_s


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
        self._wakeups_lost = False
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
        """Tell every replica's loop that something was queued; with Redis away, the next sweep finds it instead."""
        try:
            self.wakeups.notify(self.topic, "queued")
        except Unavailable:
            pass  # the row is committed: a wake-up is only a hint (logged where Redis failed)

    def _run(self) -> None:
        subscription = self.wakeups.subscribe(self.topic)
        retry = Backoff(FIRST_RETRY_S, self.sweep_interval_s)
        next_sweep = 0.0
        try:
            while not self.stopping.is_set():
                sweeping = monotonic() >= next_sweep
                if sweeping:
                    next_sweep = monotonic() + self.sweep_interval_s
                outage = (self._guarded(self.sweep) if sweeping else None) or self._guarded(self.drain)
                if outage is None:
                    retry.reset()
                else:
                    delay = retry.next_delay()
                    log.info("a peer is out of reach; trying again", loop=self.name, reason=outage, retry_in_s=delay)
                    next_sweep = min(next_sweep, monotonic() + delay)
                self._wait(subscription, max(0.0, min(self.sweep_interval_s, next_sweep - monotonic())))
        finally:
            subscription.close()

    def _wait(self, subscription: Subscription, timeout_s: float) -> None:
        try:
            subscription.wait(timeout_s)
        except Unavailable:  # Redis away: poll until it answers again
            if not self._wakeups_lost:
                log.warning("wake-ups unavailable; polling the table every second", loop=self.name)
            self._wakeups_lost = True
            self.stopping.wait(min(timeout_s, 1.0))
            return
        if self._wakeups_lost:
            log.info("wake-ups are back", loop=self.name)
        self._wakeups_lost = False

    def _guarded(self, work: Callable[[], object]) -> str | None:
        """Run one pass; returns what was out of reach when a peer or a store was (None otherwise)."""
        try:
            work()
        except Unavailable as error:
            return error.message
        except Exception as error:  # a bug must not end the loop; the next pass retries
            outage = store_outage(error)
            if outage is not None:
                return outage.message
            log.exception("background pass failed", loop=self.name)
        return None
