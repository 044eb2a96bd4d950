"""/export: the caller's traces and annotations as JSONL downloads."""

from __future__ import annotations

from collections.abc import Iterator

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from stash.rm.v1 import ingest_pb2
from stash_gateway.auth import Reader
from stash_gateway.routes import API_PREFIX

router = APIRouter(prefix=API_PREFIX, tags=["export"])
JSONL = "application/x-ndjson"
EXPORT_DEADLINE_S = 3600


def _chunks(responses: Iterator[ingest_pb2.ExportTracesResponse]) -> Iterator[bytes]:
    for response in responses:
        yield response.data


@router.get("/export/traces", summary="Every trace as Stash Trace Format JSONL", response_class=StreamingResponse)
def export_traces(request: Request, principal: Reader) -> StreamingResponse:
    """Canonical JSONL that re-imports (format `stash`) to the same traces."""
    stream = request.app.state.peers.ingest.ExportTraces(
        ingest_pb2.ExportTracesRequest(owner_id=principal.user_id), timeout=EXPORT_DEADLINE_S
    )
    return download(_chunks(stream), "traces.jsonl")


@router.get("/export/annotations", summary="Every annotation as JSONL", response_class=StreamingResponse)
def export_annotations(request: Request, principal: Reader) -> StreamingResponse:
    """One annotation a line, with the trace id, step index, rating, comment, quote and author."""
    stream = request.app.state.peers.ingest.ExportAnnotations(
        ingest_pb2.ExportAnnotationsRequest(owner_id=principal.user_id), timeout=EXPORT_DEADLINE_S
    )
    return download(_chunks(stream), "annotations.jsonl")


def download(chunks: Iterator[bytes], filename: str) -> StreamingResponse:
    """A JSONL attachment streamed from gRPC chunks."""
    headers = {"Content-Disposition": f'attachment; filename="{filename}"'}
    return StreamingResponse(chunks, media_type=JSONL, headers=headers)
