"""Store outages: which failures mean that a database or Redis is out of reach, and what a caller reads of one.

A store that blinks (PostgreSQL restarting, Redis failing over, a SQLite file locked past its busy timeout) is
the same request succeeding a moment later, so the caller gets a retryable answer: UNAVAILABLE over gRPC, 503
with Retry-After over HTTP. The caller never reads the driver's text, which names hosts and ports and may quote
SQL: `store_outage` returns a platform error that says only which kind of store is away, and the service logs
the driver's text for its operators. The connection pools reconnect by themselves (`pool_pre_ping`, redis-py's
reconnect on the next command), so a service recovers without a restart.
"""

from __future__ import annotations

import sys

from sqlalchemy import exc as sql_errors

from stash_common.errors import Unavailable

DATABASE = "database"
REDIS = "redis"
_SPOKEN = {DATABASE: "the database", REDIS: "Redis"}
# SQLAlchemy's wrappers of a lost or refused connection; a DBAPIError says so with `connection_invalidated`.
_DATABASE_ERRORS = (sql_errors.OperationalError, sql_errors.InterfaceError, sql_errors.TimeoutError)


def unavailable(store: str) -> Unavailable:
    """The error a caller gets while `store` (DATABASE or REDIS) is out of reach: no host, port or driver text."""
    return Unavailable(f"{_SPOKEN[store]} is unavailable; retry shortly")


def unreachable_store(error: BaseException) -> str | None:
    """DATABASE or REDIS when `error` means that store is out of reach; None for any other failure."""
    if isinstance(error, _DATABASE_ERRORS):
        return DATABASE
    if isinstance(error, sql_errors.DBAPIError) and error.connection_invalidated:
        return DATABASE
    # The drivers are looked up, not imported: a process that never loaded one cannot have raised its errors,
    # and importing psycopg or redis into every process would only slow its start.
    psycopg = sys.modules.get("psycopg")
    if psycopg is not None and isinstance(error, psycopg.OperationalError | psycopg.InterfaceError):
        return DATABASE
    redis = sys.modules.get("redis")
    if redis is not None and isinstance(error, redis.ConnectionError | redis.TimeoutError):
        return REDIS
    return None


def store_outage(error: BaseException) -> Unavailable | None:
    """The retryable platform error for `error` when it means a store is out of reach, else None."""
    store = unreachable_store(error)
    return None if store is None else unavailable(store)
