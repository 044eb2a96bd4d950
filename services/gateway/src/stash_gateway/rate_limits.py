"""Per-key rate limits of the expensive routes: imports, OTLP and /query.

Each API key has one token bucket per group, holding a minute's allowance: a key may send that many
requests in a burst, then one each 60/limit seconds. A refused request is 429 with `Retry-After`
(REST; OTLP/HTTP's body is a RESOURCE_EXHAUSTED `google.rpc.Status` with the same delay as its
`RetryInfo`, `stash_gateway.otlp`) or RESOURCE_EXHAUSTED with a `google.rpc.RetryInfo` (OTLP/gRPC);
the OpenTelemetry exporters honour both. Buckets live in the gateway process: with several replicas
each enforces its own.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Literal

from fastapi import Depends, HTTPException, Request

from stash_gateway.accounts import Principal
from stash_gateway.auth import Reader, Writer
from stash_gateway.settings import GatewaySettings

Group = Literal["imports", "otlp", "query"]


class RateLimited(Exception):
    """A key spent its allowance of a group; `retry_after_s` says when the next request is allowed."""

    def __init__(self, group: Group, per_minute: int, retry_after_s: int) -> None:
        super().__init__(f"rate limit of {per_minute} {group} requests per minute per API key exceeded")
        self.retry_after_s = retry_after_s


@dataclass
class _Bucket:
    tokens: float
    updated: float


class RateLimits:
    """Token buckets per (API key, group); a limit of 0 turns a group's limit off."""

    def __init__(self, settings: GatewaySettings, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_minute: dict[Group, int] = {
            "imports": settings.rate_limit_imports_per_minute,
            "otlp": settings.rate_limit_otlp_per_minute,
            "query": settings.rate_limit_query_per_minute,
        }
        self.clock = clock
        self.buckets: dict[tuple[str, Group], _Bucket] = {}
        self.lock = threading.Lock()

    def acquire(self, key_id: str, group: Group) -> None:
        """Spend one request of the key's allowance; RateLimited when none is left."""
        limit = self.per_minute[group]
        if limit <= 0:
            return
        rate = limit / 60.0  # tokens per second
        now = self.clock()
        with self.lock:
            bucket = self.buckets.setdefault((key_id, group), _Bucket(float(limit), now))
            bucket.tokens = min(float(limit), bucket.tokens + (now - bucket.updated) * rate)
            bucket.updated = now
            if bucket.tokens < 1:
                raise RateLimited(group, limit, math.ceil((1 - bucket.tokens) / rate))
            bucket.tokens -= 1


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
