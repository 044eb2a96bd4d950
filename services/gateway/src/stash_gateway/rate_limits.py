"""Per-key rate limits of the expensive routes: imports, OTLP and /query.

Each API key has one token bucket per group, holding a minute's allowance: a key may send that many
requests in a burst, then one each 60/limit seconds. A refused request is 429 with `Retry-After`
(REST; OTLP/HTTP's body is a RESOURCE_EXHAUSTED `google.rpc.Status` with the same delay as its
`RetryInfo`, `stash_gateway.otlp`) or RESOURCE_EXHAUSTED with a `google.rpc.RetryInfo` (OTLP/gRPC);
the OpenTelemetry exporters honour both.

Where the buckets live: in Redis in the cluster profile (`STASH_GATEWAY_REDIS_URL`), so every gateway
replica spends from the same allowance (one Lua script reads, refills and spends a bucket atomically,
on Redis's clock, so replicas' clocks never matter); in the process in the embedded profile, which
runs one gateway. While Redis cannot be reached requests are let through, with a warning a minute:
a limiter outage must not stop imports.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Literal, Protocol

import redis
import structlog
from fastapi import Depends, HTTPException, Request

from stash_gateway.accounts import Principal
from stash_gateway.auth import Reader, Writer
from stash_gateway.settings import GatewaySettings

Group = Literal["imports", "otlp", "query"]
log = structlog.get_logger(__name__)

BUCKET_KEY_PREFIX = "stash:rate:"
OUTAGE_WARNING_INTERVAL_S = 60.0


class RateLimited(Exception):
    """A key spent its allowance of a group; `retry_after_s` says when the next request is allowed."""

    def __init__(self, group: Group, per_minute: int, retry_after_s: int) -> None:
        super().__init__(f"rate limit of {per_minute} {group} requests per minute per API key exceeded")
        self.retry_after_s = retry_after_s


class Buckets(Protocol):
    """Where the token buckets are kept."""

    def spend(self, bucket: str, capacity: int, rate: float) -> float:
        """Refill `bucket` (`rate` tokens a second, up to `capacity`; a new one is full) and spend one token;
        0 when it was spent, else the seconds until one is there (nothing is spent)."""
        ...


@dataclass
class _Bucket:
    tokens: float
    updated: float


class InProcessBuckets:
    """Buckets in this process (the embedded profile's one gateway)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.buckets: dict[str, _Bucket] = {}
        self.lock = threading.Lock()

    def spend(self, bucket: str, capacity: int, rate: float) -> float:
        """See `Buckets.spend`."""
        now = self.clock()
        with self.lock:
            state = self.buckets.setdefault(bucket, _Bucket(float(capacity), now))
            state.tokens = min(float(capacity), state.tokens + (now - state.updated) * rate)
            state.updated = now
            if state.tokens < 1:
                return (1 - state.tokens) / rate
            state.tokens -= 1
            return 0.0


# KEYS[1]: the bucket; ARGV: capacity, tokens per second. Returns the wait as a string (a Lua number
# would come back truncated to an integer). The key expires once it would be full again anyway.
_SPEND = """
local capacity, rate = tonumber(ARGV[1]), tonumber(ARGV[2])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local state = redis.call('HMGET', KEYS[1], 'tokens', 'updated')
local tokens = tonumber(state[1]) or capacity
local updated = tonumber(state[2]) or now
tokens = math.min(capacity, tokens + math.max(0, now - updated) * rate)
local wait = 0
if tokens < 1 then
  wait = (1 - tokens) / rate
else
  tokens = tokens - 1
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'updated', tostring(now))
redis.call('EXPIRE', KEYS[1], math.ceil(capacity / rate) + 1)
return tostring(wait)
"""


class RedisBuckets:
    """Buckets in Redis, shared by every gateway replica."""

    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(url, socket_timeout=2.0, socket_connect_timeout=2.0)
        self.script = self.client.register_script(_SPEND)
        self.warned_at = -math.inf

    def spend(self, bucket: str, capacity: int, rate: float) -> float:
        """See `Buckets.spend`; 0 (let through) while Redis cannot be reached."""
        try:
            return float(self.script(keys=[BUCKET_KEY_PREFIX + bucket], args=[capacity, rate]))
        except redis.RedisError as error:
            if time.monotonic() - self.warned_at >= OUTAGE_WARNING_INTERVAL_S:
                self.warned_at = time.monotonic()
                log.warning("rate limits not enforced: Redis cannot be reached", error=str(error))
            return 0.0


def make_buckets(settings: GatewaySettings) -> Buckets:
    """Redis buckets when a URL is configured (the cluster profile), in-process ones otherwise."""
    return RedisBuckets(settings.redis_url) if settings.redis_url else InProcessBuckets()


class RateLimits:
    """A token bucket per (API key, group); a limit of 0 turns a group's limit off."""

    def __init__(self, settings: GatewaySettings, buckets: Buckets) -> None:
        self.per_minute: dict[Group, int] = {
            "imports": settings.rate_limit_imports_per_minute,
            "otlp": settings.rate_limit_otlp_per_minute,
            "query": settings.rate_limit_query_per_minute,
        }
        self.buckets = buckets

    def acquire(self, key_id: str, group: Group) -> None:
        """Spend one request of the key's allowance; RateLimited when none is left."""
        limit = self.per_minute[group]
        if limit <= 0:
            return
        wait_s = self.buckets.spend(f"{key_id}:{group}", limit, limit / 60.0)
        if wait_s > 0:
            raise RateLimited(group, limit, math.ceil(wait_s))


def _limited(group: Group, principal: Principal, request: Request) -> Principal:
    limits: RateLimits = request.app.state.rate_limits
    try:
        limits.acquire(principal.key_id, group)
    except RateLimited as error:
        raise HTTPException(429, str(error), headers={"Retry-After": str(error.retry_after_s)}) from None
    return principal


def limited_writer(group: Group) -> Callable[[Request, Principal], Principal]:
    """A dependency: a full-access key within its allowance of `group` (429 with Retry-After past it)."""

    def dependency(request: Request, principal: Writer) -> Principal:
        return _limited(group, principal, request)

    return dependency


def limited_reader(group: Group) -> Callable[[Request, Principal], Principal]:
    """A dependency: any valid key within its allowance of `group` (429 with Retry-After past it)."""

    def dependency(request: Request, principal: Reader) -> Principal:
        return _limited(group, principal, request)

    return dependency


ImportWriter = Annotated[Principal, Depends(limited_writer("imports"))]
QueryReader = Annotated[Principal, Depends(limited_reader("query"))]
