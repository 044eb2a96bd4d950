"""One owner's SQL on their warm database, after loading whatever changed since it was loaded.

A query takes the owner's database lock first (one query or load per owner at a time), then one of
`concurrency` slots, so one user's queries cannot occupy every slot while they wait for each other.
Before it runs, the engine asks each owning service for the owner's change marker (three small calls,
made at once) and reloads only the tables of a service whose marker moved; a cold database loads all
three services at once, copying each one's tables into DuckDB as soon as its stream has ended.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import TYPE_CHECKING

import structlog
from prometheus_client import CollectorRegistry, Counter, Histogram

from stash_common.errors import Unavailable
from stash_gateway.peers import Peers
from stash_gateway.query.cache import CacheEntry, OwnerCache
from stash_gateway.query.limits import QueryLimits
from stash_gateway.query.loading import SOURCES, load_tables, owner_version
from stash_gateway.settings import GatewaySettings

if TYPE_CHECKING:  # DuckDB loads with the first query, not with the gateway (`stash_gateway.query.limits`)
    from stash_gateway.query.results import QueryResult

log = structlog.get_logger(__name__)
MB = 1024 * 1024


class QueryEngine:
    """Checks, loads and runs the queries of every owner, within the gateway's limits."""

    def __init__(self, peers: Peers, settings: GatewaySettings, registry: CollectorRegistry) -> None:
        self.peers = peers
        self.limits = QueryLimits(
            timeout_s=settings.query_timeout_s,
            max_rows=settings.query_max_rows,
            memory_limit_mb=settings.query_memory_limit_mb,
            threads=settings.query_threads,
        )
        self.cache = OwnerCache(self.limits, settings.query_cache_owners, settings.query_cache_mb * MB)
        self.version_timeout_s = settings.rpc_timeout_s
        self.load_timeout_s = settings.query_load_timeout_s
        self.concurrency = settings.query_concurrency
        self._slots = threading.BoundedSemaphore(settings.query_concurrency)
        self._pool = ThreadPoolExecutor(len(SOURCES) * settings.query_concurrency, thread_name_prefix="query-load")
        self.loads = Counter(
            "stash_query_loads", "an owner's tables of one service loaded into DuckDB", ["source"], registry=registry
        )
        self.load_seconds = Histogram(
            "stash_query_load_seconds", "time to stream and load an owner's stale tables", registry=registry
        )

    def run(self, owner_id: str, sql: str) -> QueryResult:
        """The query's result on the owner's current rows; INVALID_ARGUMENT for a refused or failing query."""
        from stash_gateway.query.statements import check_select

        check_select(sql)
        entry = self.cache.entry(owner_id)
        with entry.database.lock:
            if not self._slots.acquire(timeout=self.limits.timeout_s):
                raise Unavailable(f"the gateway is running {self.concurrency} queries already; retry shortly")
            try:
                self._refresh(owner_id, entry)
                return entry.database.run(sql)
            finally:
                self._slots.release()

    def _refresh(self, owner_id: str, entry: CacheEntry) -> None:
        stale = self._stale_sources(owner_id, entry)
        if not stale:
            return
        started = time.perf_counter()
        timeout_s = self.load_timeout_s
        futures = [self._pool.submit(load_tables, self.peers, source, owner_id, timeout_s) for source in stale]
        loads = []
        # Each service's tables go into DuckDB as soon as they have come, while the others still stream.
        for future in as_completed(futures):
            loaded = future.result()
            loads.append(loaded)
            entry.database.replace_tables(loaded.tables)
            entry.versions[loaded.source] = loaded.version
            self.loads.labels(loaded.source).inc()
        self.cache.resized(owner_id, entry.database.memory_bytes())
        self.load_seconds.observe(time.perf_counter() - started)
        log.info(
            "query tables loaded",
            owner_id=owner_id,
            sources=stale,
            rows=sum(loaded.rows for loaded in loads),
            seconds=round(time.perf_counter() - started, 3),
        )

    def _stale_sources(self, owner_id: str, entry: CacheEntry) -> list[str]:
        """The services whose tables of the owner changed since they were loaded (all, for a new database)."""
        if not entry.versions:
            return list(SOURCES)
        current = self._pool.map(
            lambda source: owner_version(self.peers, source, owner_id, self.version_timeout_s), SOURCES
        )
        return [
            source for source, version in zip(SOURCES, current, strict=True) if entry.versions.get(source) != version
        ]

    def close(self) -> None:
        """Stop the loading threads."""
        self._pool.shutdown(wait=False, cancel_futures=True)
