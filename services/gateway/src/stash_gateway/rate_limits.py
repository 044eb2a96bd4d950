"""Per-key rate limits of the expensive routes (imports, OTLP and /query), and the bound on a key's running imports.

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

Concurrent imports: a key may have `max_concurrent_imports_per_key` imports (POST /traces/import,
/api/v1/me/transcripts) running at once; one more is refused at once with 429 and `Retry-After: 1`,
before its body is read, so one key can hold at most that many bodies in the gateway and that many
payloads in ingest's memory. A refusal, not a queue: a client that retries after the delay gets in as
soon as one of its imports ends, and a request never waits unseen behind a key's earlier ones. Slots
are kept beside the buckets (Redis: a sorted set of leases per key that expire after the import
deadline, so a replica that dies never holds a slot for good).
"""

from __future__ import annotations

import math
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Protocol

import structlog
from fastapi import Depends, HTTPException, Request

from stash_gateway.accounts import Principal
from stash_gateway.auth import Reader, Writer
from stash_gateway.settings import GatewaySettings

Group = Literal["imports", "otlp", "query"]
log = structlog.get_logger(__name__)

BUCKET_KEY_PREFIX = "stash:rate:"
SLOTS_KEY_PREFIX = "stash:imports:"
IMPORT_RETRY_AFTER_S = 1
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


def _connect(url: str) -> tuple[Any, type[Exception]]:
    """A Redis client for `url` and the error class its calls raise."""
    import redis  # most of a second to import: only the cluster profile's gateway needs it

    client = redis.Redis.from_url(url, socket_timeout=2.0, socket_connect_timeout=2.0)
    return client, redis.RedisError


class RedisBuckets:
    """Buckets in Redis, shared by every gateway replica."""

    def __init__(self, url: str) -> None:
        self.client, self.redis_error = _connect(url)
        self.script = self.client.register_script(_SPEND)
        self.warned_at = -math.inf

    def spend(self, bucket: str, capacity: int, rate: float) -> float:
        """See `Buckets.spend`; 0 (let through) while Redis cannot be reached."""
        try:
            return float(self.script(keys=[BUCKET_KEY_PREFIX + bucket], args=[capacity, rate]))
        except self.redis_error as error:
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


class Slots(Protocol):
    """Where the running imports of each key are counted."""

    def take(self, key: str, most: int, lease_s: float) -> str | None:
        """A token for one more running import of `key`, or None when `most` are running."""
        ...

    def give_back(self, key: str, token: str) -> None:
        """End the import that took `token`."""
        ...


class InProcessSlots:
    """Running imports counted in this process (the embedded profile's one gateway)."""

    def __init__(self) -> None:
        self.running: dict[str, int] = {}
        self.lock = threading.Lock()

    def take(self, key: str, most: int, lease_s: float) -> str | None:
        """See `Slots.take`."""
        with self.lock:
            if self.running.get(key, 0) >= most:
                return None
            self.running[key] = self.running.get(key, 0) + 1
            return key

    def give_back(self, key: str, token: str) -> None:
        """See `Slots.give_back`."""
        with self.lock:
            self.running[key] -= 1
            if not self.running[key]:
                del self.running[key]


# KEYS[1]: the key's leases (a sorted set scored by expiry); ARGV: token, most, lease seconds. 1 when taken.
_TAKE = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[3])) + 1)
return 1
"""


class RedisSlots:
    """Running imports as leases in Redis, shared by every gateway replica."""

    def __init__(self, url: str) -> None:
        self.client, self.redis_error = _connect(url)
        self.script = self.client.register_script(_TAKE)
        self.warned_at = -math.inf

    def take(self, key: str, most: int, lease_s: float) -> str | None:
        """See `Slots.take`; a token (let through) while Redis cannot be reached."""
        token = secrets.token_hex(8)
        try:
            taken = self.script(keys=[SLOTS_KEY_PREFIX + key], args=[token, most, lease_s])
        except self.redis_error as error:
            self._warn(error)
            return token
        return token if int(taken) else None

    def give_back(self, key: str, token: str) -> None:
        """See `Slots.give_back`; an unreachable Redis lets the lease expire."""
        try:
            self.client.zrem(SLOTS_KEY_PREFIX + key, token)
        except self.redis_error as error:
            self._warn(error)

    def _warn(self, error: Exception) -> None:
        if time.monotonic() - self.warned_at >= OUTAGE_WARNING_INTERVAL_S:
            self.warned_at = time.monotonic()
            log.warning("concurrent imports not bounded: Redis cannot be reached", error=str(error))


def make_slots(settings: GatewaySettings) -> Slots:
    """Redis slots when a URL is configured (the cluster profile), in-process ones otherwise."""
    return RedisSlots(settings.redis_url) if settings.redis_url else InProcessSlots()


def import_slot(
    request: Request, principal: Annotated[Principal, Depends(limited_writer("imports"))]
) -> Iterator[Principal]:
    """A dependency: a full-access key within its import allowance that has an import slot for this request,
    held until the request ends (429 with Retry-After when the key's imports are all running)."""
    settings: GatewaySettings = request.app.state.settings
    most = settings.max_concurrent_imports_per_key
    if most <= 0:
        yield principal
        return
    slots: Slots = request.app.state.import_slots
    token = slots.take(principal.key_id, most, settings.import_timeout_s)
    if token is None:
        detail = (
            f"{most} imports of this API key are already running; a key may run {most} at once: retry after one ends"
        )
        raise HTTPException(429, detail, headers={"Retry-After": str(IMPORT_RETRY_AFTER_S)})
    try:
        yield principal
    finally:
        slots.give_back(principal.key_id, token)


ImportWriter = Annotated[Principal, Depends(import_slot)]
QueryReader = Annotated[Principal, Depends(limited_reader("query"))]
