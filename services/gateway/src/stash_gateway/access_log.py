"""Uvicorn's access log without query strings: a signed download URL carries its signature there,
and a log line must never hold a credential (API keys travel in headers, which are not logged)."""

from __future__ import annotations

import logging

ACCESS_LOGGER = "uvicorn.access"
_PATH_ARG = 2  # uvicorn's access record: (client address, method, full path, HTTP version, status code)


class QueryStringRedactor(logging.Filter):
    """Replaces the query string of each access record's path with `?<redacted>`."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        full_path = args[_PATH_ARG] if isinstance(args, tuple) and len(args) > _PATH_ARG else None
        if isinstance(args, tuple) and isinstance(full_path, str):
            path, query, _ = full_path.partition("?")
            if query:
                record.args = (*args[:_PATH_ARG], f"{path}?<redacted>", *args[_PATH_ARG + 1 :])
        return True


def redact_access_log() -> None:
    """Install the redactor on uvicorn's access logger (once per process)."""
    logger = logging.getLogger(ACCESS_LOGGER)
    if not any(isinstance(existing, QueryStringRedactor) for existing in logger.filters):
        logger.addFilter(QueryStringRedactor())
