"""Rate limits in the cluster profile: every gateway replica spends from one bucket per key, and counts a key's
running imports in one set of leases, in real Redis."""

from __future__ import annotations

import math
import time

import pytest
import structlog

from stash_common.settings import load
from stash_gateway.rate_limits import RateLimited, RateLimits, RedisBuckets, RedisSlots
from stash_gateway.settings import GatewaySettings
from support.processes import free_port


def _replica(redis_url: str, **per_minute: int) -> RateLimits:
    settings = load(GatewaySettings, **{f"rate_limit_{group}_per_minute": n for group, n in per_minute.items()})
    return RateLimits(settings, RedisBuckets(redis_url))


def test_two_replicas_share_one_allowance_per_key(redis_url: str) -> None:
    first, second = _replica(redis_url, imports=3), _replica(redis_url, imports=3)
    first.acquire("key-a", "imports")
    second.acquire("key-a", "imports")
    first.acquire("key-a", "imports")

    with pytest.raises(RateLimited, match="rate limit of 3 imports requests per minute") as caught:
        second.acquire("key-a", "imports")

    assert 19 <= caught.value.retry_after_s <= 20  # one token comes back every 20 s
    second.acquire("key-b", "imports")  # another key has its own bucket
    second.acquire("key-a", "query")  # and so has another group (its default limit)


def test_a_bucket_refills_on_redis_clock_and_expires_when_full(redis_url: str) -> None:
    buckets = RedisBuckets(redis_url)
    assert buckets.spend("key-a:otlp", 1, 100.0) == 0
    wait_s = buckets.spend("key-a:otlp", 1, 100.0)

    assert 0 < wait_s <= 0.01
    ttl_s = buckets.client.ttl("stash:rate:key-a:otlp")
    assert 0 < ttl_s <= math.ceil(1 / 100.0) + 1


def test_requests_pass_with_a_warning_while_redis_cannot_be_reached() -> None:
    limits = _replica(f"redis://127.0.0.1:{free_port()}/0", imports=1)

    with structlog.testing.capture_logs() as logs:
        for _ in range(3):
            limits.acquire("key-a", "imports")

    warnings = [entry for entry in logs if entry["log_level"] == "warning"]
    assert [entry["event"] for entry in warnings] == ["rate limits not enforced: Redis cannot be reached"]


def test_two_replicas_share_the_running_imports_of_a_key(redis_url: str) -> None:
    first, second = RedisSlots(redis_url), RedisSlots(redis_url)
    one = first.take("key-a", 2, 600.0)
    two = second.take("key-a", 2, 600.0)

    assert one and two
    assert first.take("key-a", 2, 600.0) is None  # both of key-a's slots are held, on either replica
    assert second.take("key-b", 2, 600.0)  # another key has its own

    second.give_back("key-a", one)
    assert first.take("key-a", 2, 600.0)


def test_an_import_lease_expires_so_a_dead_replica_holds_no_slot_for_good(redis_url: str) -> None:
    slots = RedisSlots(redis_url)
    assert slots.take("key-a", 1, 0.05)
    assert slots.take("key-a", 1, 600.0) is None

    time.sleep(0.1)  # the first lease's deadline passes (Redis's clock)

    assert slots.take("key-a", 1, 600.0)
