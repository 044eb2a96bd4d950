"""Per-key token buckets: a minute's allowance at once, then one request per 60/limit seconds."""

import pytest

from stash_common.settings import load
from stash_gateway.rate_limits import InProcessBuckets, RateLimited, RateLimits
from stash_gateway.settings import GatewaySettings


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _limits(clock: Clock, **per_minute: int) -> RateLimits:
    settings = load(GatewaySettings, **{f"rate_limit_{group}_per_minute": n for group, n in per_minute.items()})
    return RateLimits(settings, InProcessBuckets(clock))


def test_a_burst_of_a_minutes_allowance_passes_then_the_next_request_waits() -> None:
    clock = Clock()
    limits = _limits(clock, imports=3)
    for _ in range(3):
        limits.acquire("key-a", "imports")

    with pytest.raises(RateLimited, match="rate limit of 3 imports requests per minute") as caught:
        limits.acquire("key-a", "imports")

    assert caught.value.retry_after_s == 20
    clock.now += 20
    limits.acquire("key-a", "imports")


def test_keys_and_groups_have_their_own_buckets() -> None:
    limits = _limits(Clock(), imports=1, query=1)
    limits.acquire("key-a", "imports")

    limits.acquire("key-b", "imports")
    limits.acquire("key-a", "query")
    with pytest.raises(RateLimited):
        limits.acquire("key-a", "imports")


def test_a_limit_of_zero_turns_the_group_off() -> None:
    limits = _limits(Clock(), otlp=0)

    for _ in range(10_000):
        limits.acquire("key-a", "otlp")


def test_the_defaults_are_generous() -> None:
    settings = load(GatewaySettings)

    assert settings.rate_limit_imports_per_minute >= 600
    assert settings.rate_limit_otlp_per_minute >= 6000
    assert settings.rate_limit_query_per_minute >= 1200
