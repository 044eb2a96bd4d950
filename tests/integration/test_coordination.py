"""Wake-ups, in-process and on the machine's real Redis, through the same tests."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
from structlog.testing import capture_logs

from stash_common.coordination import MAX_PENDING_MESSAGES, InProcessWakeups, Subscription, Wakeups, make_wakeups
from stash_common.errors import Unavailable
from stash_common.redis_wakeups import SOCKET_TIMEOUT_S, RedisWakeups
from support.stores import private_redis

# Generous bounds: they only show that a waiter woke up, never how fast.
PROMPT_S = 5.0
LONG_WAIT_S = 30.0


@pytest.fixture(params=["in-process", "redis"])
def wakeups(request: pytest.FixtureRequest) -> Iterator[Wakeups]:
    redis_url = request.getfixturevalue("redis_url") if request.param == "redis" else None
    backend = make_wakeups(redis_url)
    yield backend
    if isinstance(backend, RedisWakeups):
        backend.close()


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


def test_make_wakeups_returns_in_process_backend_when_no_url() -> None:
    assert isinstance(make_wakeups(None), InProcessWakeups)


def test_redis_wakeup_reaches_subscriber_when_published_by_another_client(redis_url: str) -> None:
    publisher, listener = RedisWakeups(redis_url), RedisWakeups(redis_url)
    subscription = listener.subscribe("models")
    publisher.notify("models", "model-7 queued")
    assert _collect(subscription, 1) == ["model-7 queued"]
    publisher.close()
    listener.close()


def test_redis_wakeups_raise_unavailable_when_server_unreachable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"redis://127.0.0.1:{sock.getsockname()[1]}/0"
    with capture_logs() as logs, pytest.raises(Unavailable) as raised:
        RedisWakeups(url).notify("models", "model-7 queued")

    assert raised.value.message == "Redis is unavailable; retry shortly"  # no host or port for a caller
    assert [entry["address"] for entry in logs if entry["log_level"] == "warning"] == [url.split("/")[2]]


def test_redis_out_of_reach_is_warned_once_per_outage_and_its_return_logged() -> None:
    with private_redis() as server:
        wakeups = RedisWakeups(server.url)
        subscription = wakeups.subscribe("models")
        with capture_logs() as logs:
            for _ in range(2):
                server.stop()
                for _ in range(3):  # what every queue loop does each second while Redis is away
                    with pytest.raises(Unavailable):
                        subscription.wait(timeout_s=0)
                with pytest.raises(Unavailable):
                    wakeups.notify("models", "model-7 queued")
                server.start()
                assert subscription.wait(timeout_s=0) == []
                wakeups.notify("models", "model-7 queued")
        wakeups.close()

    address = f"127.0.0.1:{server.port}"
    events = [(entry["log_level"], entry["event"], entry["address"]) for entry in logs]
    outage = [
        ("warning", "Redis is unreachable; check STASH_*_REDIS_URL", address),
        ("info", "Redis is reachable again", address),
    ]
    assert events == outage * 2


def test_a_redis_wait_longer_than_the_socket_timeout_returns_quietly(redis_url: str) -> None:
    wakeups = RedisWakeups(redis_url)
    subscription = wakeups.subscribe("models")

    with capture_logs() as logs:
        messages = subscription.wait(timeout_s=SOCKET_TIMEOUT_S + 5)

    assert (messages, logs) == ([], [])
    wakeups.close()


def _collect(subscription: Subscription, count: int) -> list[str]:
    """Wait until `count` messages have arrived (a backend may deliver them over several waits)."""
    messages: list[str] = []
    deadline = time.monotonic() + PROMPT_S
    while len(messages) < count and time.monotonic() < deadline:
        messages += subscription.wait(timeout_s=PROMPT_S)
    return messages
