"""The access log keeps the path and drops the query string, where signed URLs carry their signature."""

import logging

from stash_gateway.access_log import QueryStringRedactor


def _record(path: str) -> logging.LogRecord:
    args = ("127.0.0.1:5000", "GET", path, "1.1", 200)
    return logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d', args, None)


def test_a_signed_urls_signature_never_reaches_the_line() -> None:
    record = _record("/api/v1/rm/artifacts/models/m1.bin?expires=1&signature=deadbeef")

    assert QueryStringRedactor().filter(record)
    assert record.getMessage() == '127.0.0.1:5000 - "GET /api/v1/rm/artifacts/models/m1.bin?<redacted> HTTP/1.1" 200'


def test_a_path_without_query_is_unchanged() -> None:
    record = _record("/api/v1/rm/traces")

    QueryStringRedactor().filter(record)

    assert record.getMessage() == '127.0.0.1:5000 - "GET /api/v1/rm/traces HTTP/1.1" 200'
