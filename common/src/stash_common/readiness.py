"""Readiness: whether a service can serve now, which is whether the stores it needs answer.

Liveness and readiness are told apart by gRPC health service name. The server's overall status ("") is
liveness: the process serves, and it stays SERVING through a store outage, since a restart would not bring
the store back. Each of the server's own services (`stash.rm.v1.IngestService`, …) is readiness: NOT_SERVING
while its database does not answer, so Kubernetes stops routing to it and `stash-rm status` and the
gateway's /readyz say why. A watcher checks every CHECK_EVERY_S seconds and logs each change once.

Redis does not decide readiness: it carries only hints (wake-ups, which a sweep stands in for) and the
gateway's rate limits (let through while it is away), so a Redis outage slows the platform but stops nothing.
The gateway's /readyz reports it all the same.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

import structlog
from sqlalchemy import Engine, text

log = structlog.get_logger(__name__)
CHECK_EVERY_S = 2.0
CHECK_TIMEOUT_S = 2.0

# A check returns when its store answers and raises when it does not.
StoreCheck = Callable[[], object]


def database_check(engine: Engine) -> StoreCheck:
    """A round trip to the database behind `engine`."""

    def check() -> None:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))

    return check


def redis_check(redis_url: str) -> StoreCheck:
    """A PING to the Redis at `redis_url`, on a client of its own with short timeouts."""
    import redis  # only a service configured with Redis loads the client

    client = redis.Redis.from_url(redis_url, socket_timeout=CHECK_TIMEOUT_S, socket_connect_timeout=CHECK_TIMEOUT_S)
    return client.ping


def unreachable(checks: Mapping[str, StoreCheck]) -> list[str]:
    """The stores whose check failed just now."""
    down = []
    for name, check in checks.items():
        try:
            check()
        except Exception as error:  # any failure to answer means not ready; what it was goes to the log
            log.debug("store check failed", store=name, error=str(error))
            down.append(name)
    return down


class StoreWatch:
    """Checks the stores every CHECK_EVERY_S seconds and calls `report(ready)` with the result."""

    def __init__(self, checks: Mapping[str, StoreCheck], report: Callable[[bool], None]) -> None:
        self.checks = checks
        self.report = report
        self.stopping = threading.Event()
        self._down: list[str] = []
        self._thread = threading.Thread(target=self._run, name="store-watch", daemon=True)

    def check_now(self) -> bool:
        """Check every store once, report the result if it changed, and return whether all answered."""
        down = unreachable(self.checks)
        if down and down != self._down:
            log.warning("not ready: a store does not answer", stores=down)
        elif self._down and not down:
            log.info("ready again: every store answers", stores=list(self.checks))
        self.report(not down)
        self._down = down
        return not down

    def start(self) -> None:
        """Watch in a background thread until `stop`."""
        self._thread.start()

    def stop(self) -> None:
        """End the watch."""
        self.stopping.set()

    def _run(self) -> None:
        while not self.stopping.wait(CHECK_EVERY_S):
            self.check_now()
