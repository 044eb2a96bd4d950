"""Rate limits in the cluster profile: every gateway replica spends from one bucket per key, in real Redis."""

from __future__ import annotations

import math

import pytest
import structlog

from stash_common.settings import load
from stash_gateway.rate_limits import RateLimited, RateLimits, RedisBuckets
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
