"""/export: the caller's traces and annotations as JSONL downloads."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Protocol

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from stash.rm.v1 import ingest_pb2
from stash_gateway.auth import Reader
from stash_gateway.routes import API_PREFIX
from stash_gateway.state import Services, Settings

router = APIRouter(prefix=API_PREFIX, tags=["export"])
JSONL = "application/x-ndjson"


class Chunk(Protocol):
    """A message of an export stream: it carries the next bytes of the file."""

    @property
    def data(self) -> bytes: ...


@router.get("/export/traces", summary="Every trace as Stash Trace Format JSONL", response_class=StreamingResponse)
def export_traces(
    services: Services,
    settings: Settings,
    principal: Reader,
    trace_id: Annotated[list[str] | None, Query(description="only these traces of the caller (repeatable)")] = None,
) -> StreamingResponse:
    """Canonical JSONL that re-imports (format `stash`) to the same traces; ids that are not the caller's match
    nothing."""
    message = ingest_pb2.ExportTracesRequest(owner_id=principal.user_id, trace_ids=trace_id or [])
    return download(services.ingest.ExportTraces(message, timeout=settings.export_timeout_s), "traces.jsonl")


@router.get("/export/annotations", summary="Every annotation as JSONL", response_class=StreamingResponse)
def export_annotations(services: Services, settings: Settings, principal: Reader) -> StreamingResponse:
    """One annotation a line, with the trace id, step index, rating, comment, quote and author."""
    message = ingest_pb2.ExportAnnotationsRequest(owner_id=principal.user_id)
    return download(services.ingest.ExportAnnotations(message, timeout=settings.export_timeout_s), "annotations.jsonl")


def download(stream: Iterator[Chunk], filename: str) -> StreamingResponse:
    """A JSONL attachment streamed chunk by chunk as the service sends it."""
    headers = {"Content-Disposition": f'attachment; filename="{filename}"'}
    return StreamingResponse((chunk.data for chunk in stream), media_type=JSONL, headers=headers)
