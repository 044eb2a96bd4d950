"""Leases on claimed work (jobs, evaluations): the holder renews them, every live process reclaims expired ones.

A claim that only a heartbeat keeps alive lets a replica that died (kill -9, a lost pod) be noticed in
seconds rather than after a long stale window; the rows and their expiry live in each service's tables.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import structlog

from stash_common.outages import unreachable_store

log = structlog.get_logger()


class LeaseKeeper:
    """Renews the leases this process holds, then lets `reclaim` take over the expired ones of others.

    Both run every `lease_s / 3` seconds, so a slow database write does not lose a lease. `renew` gets
    the held keys (job, row or evaluation ids). A store outage (`stash_common.outages`) is one warning when it
    begins and one info line when the leases are renewed again: the service recovers from it by itself.
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
    def holding(self, *keys: str) -> Iterator[None]:
        """Renew the leases of `keys` for as long as the block runs."""
        for key in keys:
            self.hold(key)
        try:
            yield
        finally:
            for key in keys:
                self.release(key)

    def tick(self) -> object:
        """Renew the held leases, then reclaim expired ones; what `reclaim` returned."""
        self._renew(self.held())
        return self._reclaim()

    def _run(self) -> None:
        away: str | None = None  # the store out of reach since an earlier round, if one is
        while not self._stopping.wait(self.renew_every_s):
            try:
                self.tick()
            except Exception as error:  # an outage or a bug must not end the thread; the next round retries
                away = self._failed(error, away)
            else:
                if away is not None:
                    log.info("leases renewed again", thread=self._thread.name, store=away)
                away = None

    def _failed(self, error: Exception, away: str | None) -> str | None:
        """Log a failed round: a store outage once, as a warning, when it begins; anything else with its traceback.
        Returns the store out of reach, if that was the failure."""
        store = unreachable_store(error)
        if store is None:
            log.exception("leases not renewed", thread=self._thread.name)
        elif away is None:
            first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
            log.warning(
                "leases not renewed: a store is out of reach; retrying",
                thread=self._thread.name,
                store=store,
                error=first_line,
                retry_every_s=round(self.renew_every_s, 2),
            )
        return store
