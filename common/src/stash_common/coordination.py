"""Wake-ups: an in-process backend (embedded profile) and Redis streams (cluster profile).

Wake-ups are hints only. The database row is the source of truth for every job's state; a
wake-up just lets a worker look at the table now instead of at its next periodic sweep, and
that sweep recovers anything a lost, dropped or duplicated wake-up would have left behind.
So both backends may drop messages under pressure, and callers must treat a message as
"something may have changed", never as the change itself.

No service needs a lock of its own: a worker claims a row only while it is still `queued`, so the
database alone decides who runs what, in one process or across replicas.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

import redis

from stash_common.errors import Unavailable

# Per-subscriber (in-process) and per-topic stream (Redis) bound. Dropping the oldest beyond it
# is safe because wake-ups are hints: the periodic sweep finds whatever they pointed at.
MAX_PENDING_MESSAGES = 10_000

WAKE_KEY_PREFIX = "stash:wake:"


class Subscription(Protocol):
    """Messages on one topic, collected from the moment of subscribing."""

    def wait(self, timeout_s: float) -> list[str]:
        """Messages published since the subscription began or the last wait; [] on timeout."""
        ...

    def close(self) -> None:
        """Stop collecting messages; later waits return []."""
        ...


class Wakeups(Protocol):
    """Publish and receive wake-up hints by topic; every subscriber gets every message."""

    def notify(self, topic: str, message: str) -> None:
        """Publish `message` to every current subscriber of `topic`."""
        ...

    def subscribe(self, topic: str) -> Subscription:
        """Start collecting messages published to `topic` from now on."""
        ...


def make_wakeups(redis_url: str | None) -> Wakeups:
    """Redis-backed wake-ups when a URL is given, in-process ones otherwise."""
    if redis_url:
        return RedisWakeups(redis_url)
    return InProcessWakeups()


class _InProcessSubscription:
    def __init__(self, owner: InProcessWakeups, topic: str, lock: threading.Lock) -> None:
        self._owner = owner
        self.topic = topic
        self._ready = threading.Condition(lock)
        self._pending: deque[str] = deque(maxlen=MAX_PENDING_MESSAGES)
        self._closed = False

    def deliver(self, message: str) -> None:
        # Called with the shared lock held; a full deque drops its oldest message.
        self._pending.append(message)
        self._ready.notify_all()

    def wait(self, timeout_s: float) -> list[str]:
        """Messages since the last wait, waiting up to `timeout_s` for the first one."""
        with self._ready:
            self._ready.wait_for(lambda: self._pending or self._closed, timeout=max(timeout_s, 0.0))
            messages = list(self._pending)
            self._pending.clear()
            return messages

    def close(self) -> None:
        """Unsubscribe and wake any waiter."""
        with self._ready:
            self._closed = True
            self._pending.clear()
            self._owner._forget(self)
            self._ready.notify_all()


class InProcessWakeups:
    """Wake-ups between threads of one process.

    Each subscriber buffers at most MAX_PENDING_MESSAGES undelivered messages and drops the
    oldest beyond that, since a wake-up is only a hint.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subscribers: dict[str, set[_InProcessSubscription]] = {}

    def notify(self, topic: str, message: str) -> None:
        """Hand `message` to every current subscriber of `topic`."""
        with self._lock:
            for subscription in self._subscribers.get(topic, ()):
                subscription.deliver(message)

    def subscribe(self, topic: str) -> Subscription:
        """A subscription that receives every message notified on `topic` from now on."""
        subscription = _InProcessSubscription(self, topic, self._lock)
        with self._lock:
            self._subscribers.setdefault(topic, set()).add(subscription)
        return subscription

    def _forget(self, subscription: _InProcessSubscription) -> None:
        # Called with the lock held, by the subscription's close().
        subscribers = self._subscribers.get(subscription.topic, set())
        subscribers.discard(subscription)
        if not subscribers:
            self._subscribers.pop(subscription.topic, None)


def _connect(redis_url: str) -> redis.Redis:
    return redis.Redis.from_url(redis_url, decode_responses=True)


@contextmanager
def _redis_errors(client: redis.Redis) -> Iterator[None]:
    try:
        yield
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        # Named by host and port only: the URL may carry a password.
        kwargs = client.connection_pool.connection_kwargs
        where = f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}"
        raise Unavailable(f"Redis at {where} is unreachable ({exc}); check STASH_*_REDIS_URL") from exc


class _RedisSubscription:
    def __init__(self, client: redis.Redis, stream: str, last_id: str) -> None:
        self._client = client
        self._stream = stream
        self._last_id = last_id
        self._closed = False

    def wait(self, timeout_s: float) -> list[str]:
        """Entries after the last one seen, blocking up to `timeout_s` for the first."""
        if self._closed:
            return []
        # BLOCK 0 would mean "forever", so a zero timeout becomes a plain, non-blocking read.
        block_ms = int(timeout_s * 1000) if timeout_s > 0 else None
        if block_ms == 0:
            block_ms = 1
        with _redis_errors(self._client):
            response: Any = self._client.xread(
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
        self._client = _connect(redis_url)

    def notify(self, topic: str, message: str) -> None:
        """XADD the message to the topic's stream."""
        with _redis_errors(self._client):
            self._client.xadd(WAKE_KEY_PREFIX + topic, {"m": message}, maxlen=MAX_PENDING_MESSAGES, approximate=True)

    def subscribe(self, topic: str) -> Subscription:
        """A subscription that reads every entry added to the topic's stream from now on."""
        stream = WAKE_KEY_PREFIX + topic
        return _RedisSubscription(self._client, stream, self._current_last_id(stream))

    def close(self) -> None:
        """Close the connection pool; subscriptions made from it stop working."""
        self._client.close()

    def _current_last_id(self, stream: str) -> str:
        # '$' would be resolved anew by every XREAD, losing entries added between two waits;
        # pinning the concrete newest id now keeps everything published after subscribe.
        with _redis_errors(self._client):
            newest: Any = self._client.xrevrange(stream, count=1)
        return newest[0][0] if newest else "0-0"
