"""Prometheus metrics of the gateway's HTTP traffic."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from fastapi import Request, Response
from prometheus_client import CollectorRegistry, Counter, Histogram


class HttpMetrics:
    """Request counts and latencies by method, route template and status, in their own registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "stash_http_requests", "HTTP requests served", ["method", "route", "status"], registry=self.registry
        )
        self.latency = Histogram(
            "stash_http_request_seconds", "HTTP request latency", ["method", "route"], registry=self.registry
        )

    async def middleware(self, request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        """Time one request and count it under its route template (not the raw path, to bound cardinality)."""
        started = time.perf_counter()
        response = await call_next(request)
        route = request.scope.get("route")
        template = getattr(route, "path", "unmatched")
        self.latency.labels(request.method, template).observe(time.perf_counter() - started)
        self.requests.labels(request.method, template, str(response.status_code)).inc()
        return response
