"""Wake-ups across processes (the cluster profile): one Redis stream per topic, read by every replica.

See `stash_common.coordination` for what a wake-up means; this is its Redis backend.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis
import structlog

from stash_common.coordination import MAX_PENDING_MESSAGES, Subscription
from stash_common.outages import REDIS, unavailable

log = structlog.get_logger(__name__)
WAKE_KEY_PREFIX = "stash:wake:"
# redis-py gives every command a socket timeout (5 s by default since 8.0): a blocking XREAD that outlasts it
# fails as a timeout although Redis is healthy. So one read blocks at most LONGEST_BLOCK_S, well inside
# SOCKET_TIMEOUT_S, and a longer wait returns early with nothing, which callers treat as any timeout.
SOCKET_TIMEOUT_S = 10.0
LONGEST_BLOCK_S = 5.0


def _connect(redis_url: str) -> redis.Redis:
    return redis.Redis.from_url(
        redis_url, decode_responses=True, socket_timeout=SOCKET_TIMEOUT_S, socket_connect_timeout=SOCKET_TIMEOUT_S
    )


class _RedisLink:
    """One connection pool to Redis, and whether the last call through it found Redis out of reach: the warning
    that names where comes once per outage, not once per call (every queue loop polls each second meanwhile)."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self._unreachable = False

    @contextmanager
    def calls(self) -> Iterator[None]:
        """Redis out of reach becomes the retryable `Unavailable` callers see; where it was goes to the log only."""
        try:
            yield
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            if not self._unreachable:
                log.warning("Redis is unreachable; check STASH_*_REDIS_URL", address=self._address(), error=str(exc))
            self._unreachable = True
            raise unavailable(REDIS) from exc
        if self._unreachable:
            log.info("Redis is reachable again", address=self._address())
        self._unreachable = False

    def _address(self) -> str:
        # Named by host and port only: the URL may carry a password.
        kwargs = self.client.connection_pool.connection_kwargs
        return f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}"


class _RedisSubscription:
    def __init__(self, link: _RedisLink, stream: str, last_id: str) -> None:
        self._link = link
        self._stream = stream
        self._last_id = last_id
        self._closed = False

    def wait(self, timeout_s: float) -> list[str]:
        """Entries after the last one seen, blocking up to `timeout_s` (at most LONGEST_BLOCK_S) for the first."""
        if self._closed:
            return []
        # BLOCK 0 would mean "forever", so a zero timeout becomes a plain, non-blocking read.
        block_ms = int(min(timeout_s, LONGEST_BLOCK_S) * 1000) if timeout_s > 0 else None
        if block_ms == 0:
            block_ms = 1
        with self._link.calls():
            response: Any = self._link.client.xread(
                {self._stream: self._last_id}, count=MAX_PENDING_MESSAGES, block=block_ms
            )
        if not response:
            return []
        entries = response[0][1]
        self._last_id = entries[-1][0]
        return [fields.get("m", "") for _, fields in entries]

    def close(self) -> None:
        """Stop reading; the stream itself belongs to every subscriber."""
        self._closed = True


class RedisWakeups:
    """Wake-ups across processes: one Redis stream per topic, trimmed to about 10 000 entries."""

    def __init__(self, redis_url: str) -> None:
        self._link = _RedisLink(_connect(redis_url))

    def notify(self, topic: str, message: str) -> None:
        """XADD the message to the topic's stream."""
        stream = WAKE_KEY_PREFIX + topic
        with self._link.calls():
            self._link.client.xadd(stream, {"m": message}, maxlen=MAX_PENDING_MESSAGES, approximate=True)

    def subscribe(self, topic: str) -> Subscription:
        """A subscription that reads every entry added to the topic's stream from now on."""
        stream = WAKE_KEY_PREFIX + topic
        return _RedisSubscription(self._link, stream, self._current_last_id(stream))

    def close(self) -> None:
        """Close the connection pool; subscriptions made from it stop working."""
        self._link.client.close()

    def _current_last_id(self, stream: str) -> str:
        # '$' would be resolved anew by every XREAD, losing entries added between two waits;
        # pinning the concrete newest id now keeps everything published after subscribe.
        with self._link.calls():
            newest: Any = self._link.client.xrevrange(stream, count=1)
        return newest[0][0] if newest else "0-0"
