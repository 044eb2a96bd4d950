"""Wake-ups and leases, in-process and on the machine's real Redis, through the same tests."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from stash_common.coordination import (
    MAX_PENDING_MESSAGES,
    InProcessLeases,
    InProcessWakeups,
    Leases,
    RedisLeases,
    RedisWakeups,
    Subscription,
    Wakeups,
    make_coordination,
)
from stash_common.errors import InvalidArgument, Unavailable

# Generous bounds: they only show that a waiter woke up, never how fast.
PROMPT_S = 5.0
LONG_WAIT_S = 30.0


@pytest.fixture(params=["in-process", "redis"])
def coordination(request: pytest.FixtureRequest) -> Iterator[tuple[Wakeups, Leases]]:
    redis_url = request.getfixturevalue("redis_url") if request.param == "redis" else None
    wakeups, leases = make_coordination(redis_url)
    yield wakeups, leases
    for backend in (wakeups, leases):
        if isinstance(backend, RedisWakeups | RedisLeases):
            backend.close()


@pytest.fixture
def wakeups(coordination: tuple[Wakeups, Leases]) -> Wakeups:
    return coordination[0]


@pytest.fixture
def leases(coordination: tuple[Wakeups, Leases]) -> Leases:
    return coordination[1]


def wait_until_free(leases: Leases, name: str) -> None:
    """Poll until the lease has expired, failing after a generous bound."""
    deadline = time.monotonic() + PROMPT_S
    while leases.holder(name) is not None:
        assert time.monotonic() < deadline, f"lease {name!r} never expired"
        time.sleep(0.02)


def test_acquire_grants_lease_when_free(leases: Leases) -> None:
    assert leases.holder("dispatcher") is None
    assert leases.acquire("dispatcher", "trainer-1", ttl_ms=10_000)
    assert leases.holder("dispatcher") == "trainer-1"


def test_acquire_refused_when_another_holder_has_lease(leases: Leases) -> None:
    assert leases.acquire("dispatcher", "trainer-1", ttl_ms=10_000)
    assert not leases.acquire("dispatcher", "trainer-2", ttl_ms=10_000)
    assert not leases.acquire("dispatcher", "trainer-1", ttl_ms=10_000)
    assert leases.holder("dispatcher") == "trainer-1"


def test_acquire_grants_lease_when_names_differ(leases: Leases) -> None:
    assert leases.acquire("dispatcher", "trainer-1", ttl_ms=10_000)
    assert leases.acquire("scheduler", "trainer-2", ttl_ms=10_000)


def test_renew_succeeds_only_when_caller_holds_lease(leases: Leases) -> None:
    assert not leases.renew("dispatcher", "trainer-1", ttl_ms=10_000)
    assert leases.acquire("dispatcher", "trainer-1", ttl_ms=10_000)
    assert not leases.renew("dispatcher", "trainer-2", ttl_ms=10_000)
    assert leases.renew("dispatcher", "trainer-1", ttl_ms=10_000)
    assert leases.holder("dispatcher") == "trainer-1"


def test_release_succeeds_only_when_caller_holds_lease(leases: Leases) -> None:
    assert leases.acquire("dispatcher", "trainer-1", ttl_ms=10_000)
    assert not leases.release("dispatcher", "trainer-2")
    assert leases.holder("dispatcher") == "trainer-1"
    assert leases.release("dispatcher", "trainer-1")
    assert leases.holder("dispatcher") is None
    assert not leases.release("dispatcher", "trainer-1")
    assert leases.acquire("dispatcher", "trainer-2", ttl_ms=10_000)


def test_acquire_grants_lease_when_previous_holder_expired(leases: Leases) -> None:
    assert leases.acquire("dispatcher", "trainer-1", ttl_ms=100)
    wait_until_free(leases, "dispatcher")
    assert leases.acquire("dispatcher", "trainer-2", ttl_ms=10_000)
    assert leases.holder("dispatcher") == "trainer-2"


def test_renew_refused_when_lease_expired(leases: Leases) -> None:
    assert leases.acquire("dispatcher", "trainer-1", ttl_ms=100)
    wait_until_free(leases, "dispatcher")
    assert not leases.renew("dispatcher", "trainer-1", ttl_ms=10_000)
    assert not leases.release("dispatcher", "trainer-1")


def test_renew_keeps_lease_when_original_ttl_passes(leases: Leases) -> None:
    assert leases.acquire("dispatcher", "trainer-1", ttl_ms=300)
    assert leases.renew("dispatcher", "trainer-1", ttl_ms=60_000)
    time.sleep(0.6)
    assert leases.holder("dispatcher") == "trainer-1"


@pytest.mark.parametrize("ttl_ms", [0, -5])
def test_acquire_raises_invalid_argument_when_ttl_not_positive(leases: Leases, ttl_ms: int) -> None:
    with pytest.raises(InvalidArgument, match="ttl_ms"):
        leases.acquire("dispatcher", "trainer-1", ttl_ms=ttl_ms)


def test_subscribers_receive_message_when_published_after_subscribe(wakeups: Wakeups) -> None:
    first, second = wakeups.subscribe("models"), wakeups.subscribe("models")
    wakeups.notify("models", "model-7 queued")
    wakeups.notify("models", "model-8 queued")
    assert _collect(first, 2) == ["model-7 queued", "model-8 queued"]
    assert _collect(second, 2) == ["model-7 queued", "model-8 queued"]


def test_wait_returns_empty_when_nothing_published(wakeups: Wakeups) -> None:
    subscription = wakeups.subscribe("models")
    assert subscription.wait(timeout_s=0.2) == []
    assert subscription.wait(timeout_s=0) == []


def test_wait_skips_message_when_published_before_subscribe(wakeups: Wakeups) -> None:
    wakeups.notify("models", "old news")
    subscription = wakeups.subscribe("models")
    wakeups.notify("models", "fresh")
    assert _collect(subscription, 1) == ["fresh"]


def test_wait_returns_only_new_messages_when_called_again(wakeups: Wakeups) -> None:
    subscription = wakeups.subscribe("models")
    wakeups.notify("models", "a")
    assert _collect(subscription, 1) == ["a"]
    wakeups.notify("models", "b")
    wakeups.notify("models", "c")
    assert _collect(subscription, 2) == ["b", "c"]
    assert subscription.wait(timeout_s=0.1) == []


def test_wait_ignores_message_when_topic_differs(wakeups: Wakeups) -> None:
    subscription = wakeups.subscribe("models")
    wakeups.notify("scoring", "trace-1")
    assert subscription.wait(timeout_s=0.2) == []


def test_wait_wakes_promptly_when_published_from_another_thread(wakeups: Wakeups) -> None:
    subscription = wakeups.subscribe("models")
    publisher = threading.Timer(0.2, wakeups.notify, args=("models", "model-7 queued"))
    started = time.monotonic()
    publisher.start()
    messages = subscription.wait(timeout_s=LONG_WAIT_S)
    publisher.join()
    assert messages == ["model-7 queued"]
    assert time.monotonic() - started < PROMPT_S


def test_wait_returns_empty_when_subscription_closed(wakeups: Wakeups) -> None:
    subscription = wakeups.subscribe("models")
    subscription.close()
    wakeups.notify("models", "after close")
    assert subscription.wait(timeout_s=0.1) == []


def test_close_wakes_waiter_when_in_process() -> None:
    subscription = InProcessWakeups().subscribe("models")
    closer = threading.Timer(0.2, subscription.close)
    started = time.monotonic()
    closer.start()
    assert subscription.wait(timeout_s=LONG_WAIT_S) == []
    closer.join()
    assert time.monotonic() - started < PROMPT_S


def test_in_process_buffer_drops_oldest_when_full() -> None:
    wakeups = InProcessWakeups()
    subscription = wakeups.subscribe("models")
    for index in range(MAX_PENDING_MESSAGES + 5):
        wakeups.notify("models", str(index))
    messages = subscription.wait(timeout_s=0)
    assert len(messages) == MAX_PENDING_MESSAGES
    assert messages[0] == "5"
    assert messages[-1] == str(MAX_PENDING_MESSAGES + 4)


def test_make_coordination_returns_in_process_backends_when_no_url() -> None:
    wakeups, leases = make_coordination(None)
    assert isinstance(wakeups, InProcessWakeups)
    assert isinstance(leases, InProcessLeases)


def test_redis_lease_exclusive_when_two_clients_contend(redis_url: str) -> None:
    clients = [RedisLeases(redis_url), RedisLeases(redis_url)]
    barrier = threading.Barrier(len(clients))
    granted: list[str] = []

    def contend(leases: RedisLeases, holder: str) -> None:
        barrier.wait()
        if leases.acquire("dispatcher", holder, ttl_ms=10_000):
            granted.append(holder)

    threads = [threading.Thread(target=contend, args=(c, f"proc-{i}")) for i, c in enumerate(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(granted) == 1
    winner, loser = (0, 1) if granted[0] == "proc-0" else (1, 0)
    assert clients[loser].holder("dispatcher") == granted[0]
    assert not clients[loser].release("dispatcher", f"proc-{loser}")
    assert clients[winner].release("dispatcher", granted[0])
    assert clients[loser].acquire("dispatcher", f"proc-{loser}", ttl_ms=10_000)
    for client in clients:
        client.close()


def test_redis_wakeup_reaches_subscriber_when_published_by_another_client(redis_url: str) -> None:
    publisher, listener = RedisWakeups(redis_url), RedisWakeups(redis_url)
    subscription = listener.subscribe("models")
    publisher.notify("models", "model-7 queued")
    assert _collect(subscription, 1) == ["model-7 queued"]
    publisher.close()
    listener.close()


def test_redis_backends_raise_unavailable_when_server_unreachable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"redis://127.0.0.1:{sock.getsockname()[1]}/0"
    with pytest.raises(Unavailable, match="Redis at 127.0.0.1"):
        RedisLeases(url).acquire("dispatcher", "trainer-1", ttl_ms=1_000)
    with pytest.raises(Unavailable, match="Redis at 127.0.0.1"):
        RedisWakeups(url).notify("models", "model-7 queued")


def _collect(subscription: Subscription, count: int) -> list[str]:
    """Wait until `count` messages have arrived (a backend may deliver them over several waits)."""
    messages: list[str] = []
    deadline = time.monotonic() + PROMPT_S
    while len(messages) < count and time.monotonic() < deadline:
        messages += subscription.wait(timeout_s=PROMPT_S)
    return messages
