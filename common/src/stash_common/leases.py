"""Leases on claimed work (jobs, evaluations): the holder renews them, every live process reclaims expired ones.

A claim that only a heartbeat keeps alive lets a replica that died (kill -9, a lost pod) be noticed in
seconds rather than after a long stale window; the rows and their expiry live in each service's tables.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import structlog

log = structlog.get_logger()


class LeaseKeeper:
    """Renews the leases this process holds, then lets `reclaim` take over the expired ones of others.

    Both run every `lease_s / 3` seconds, so a slow database write does not lose a lease. `renew` gets
    the held keys (job, row or evaluation ids).
    """

    def __init__(
        self, name: str, lease_s: float, renew: Callable[[list[str]], None], reclaim: Callable[[], object]
    ) -> None:
        self.renew_every_s = lease_s / 3
        self._renew = renew
        self._reclaim = reclaim
        self._held: set[str] = set()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        """Renew and reclaim in the background."""
        self._thread.start()

    def stop(self) -> None:
        """End the background thread; the held leases run out unless their rows are settled."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join()

    def hold(self, key: str) -> None:
        """Renew `key`'s lease from now on."""
        with self._lock:
            self._held.add(key)

    def release(self, key: str) -> None:
        """Stop renewing `key`'s lease (its job ended)."""
        with self._lock:
            self._held.discard(key)

    def held(self) -> list[str]:
        """The keys whose leases this replica renews."""
        with self._lock:
            return list(self._held)

    @contextmanager
    def holding(self, key: str) -> Iterator[None]:
        """Renew `key`'s lease for as long as the block runs."""
        self.hold(key)
        try:
            yield
        finally:
            self.release(key)

    def tick(self) -> object:
        """Renew the held leases, then reclaim expired ones; what `reclaim` returned."""
        self._renew(self.held())
        return self._reclaim()

    def _run(self) -> None:
        while not self._stopping.wait(self.renew_every_s):
            try:
                self.tick()
            except Exception:  # a database outage must not end the thread; the next round retries
                log.exception("leases not renewed", thread=self._thread.name)
