"""The real IngestServicer on a real gRPC port, on a fresh PostgreSQL database per test."""

from collections.abc import Iterator
from typing import Any

import pytest

from stash_ingest.titles import derive_title
from support.ingest import serve_ingest


@pytest.fixture
def ingest(postgres_url: str) -> Iterator[Any]:
    """An IngestService stub backed by PostgreSQL, with titles derived from the first request."""
    stub, stop = serve_ingest(postgres_url, derive_title)
    yield stub
    stop()
