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
from typing import Protocol

# Per-subscriber (in-process) and per-topic stream (Redis) bound. Dropping the oldest beyond it
# is safe because wake-ups are hints: the periodic sweep finds whatever they pointed at.
MAX_PENDING_MESSAGES = 10_000


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
        # Imported here: redis-py takes most of a second to import, which the embedded profile never needs.
        from stash_common.redis_wakeups import RedisWakeups

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
