"""/trace-sources: where traces come from, and the names the caller gives them."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import Field

from stash.rm.v1 import ingest_pb2
from stash_gateway.auth import Reader, Writer
from stash_gateway.openapi import RequestBody
from stash_gateway.routes import API_PREFIX
from stash_gateway.state import Services, Settings

router = APIRouter(prefix=API_PREFIX, tags=["trace sources"])


class RenameSourceBody(RequestBody):
    """`{source_id, name}`."""

    source_id: str = Field(min_length=1, max_length=200)
    name: str = Field(min_length=1, max_length=120)


def _source_json(source: ingest_pb2.TraceSource) -> dict[str, Any]:
    return {
        "source_id": source.source_id,
        "name": source.name,
        "owner_id": source.owner_id,
        "trace_count": source.trace_count,
    }


@router.get("/trace-sources", summary="The caller's trace sources")
def list_sources(services: Services, settings: Settings, principal: Reader) -> list[dict[str, Any]]:
    """Every source id of the caller with its display name and trace count."""
    message = ingest_pb2.ListTraceSourcesRequest(owner_id=principal.user_id)
    response = services.ingest.ListTraceSources(message, timeout=settings.rpc_timeout_s)
    return [_source_json(source) for source in response.sources]


@router.put("/trace-sources", summary="Name a trace source")
def rename_source(services: Services, settings: Settings, body: RenameSourceBody, principal: Writer) -> dict[str, Any]:
    """Upsert the caller's display name for a source id; traces and their revisions are untouched."""
    message = ingest_pb2.RenameTraceSourceRequest(owner_id=principal.user_id, source_id=body.source_id, name=body.name)
    return _source_json(services.ingest.RenameTraceSource(message, timeout=settings.rpc_timeout_s).source)
