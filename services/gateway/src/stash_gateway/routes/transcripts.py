"""POST /api/v1/me/transcripts: a native agent transcript (Claude Code, Codex) as a growing snapshot."""

from __future__ import annotations

from typing import Annotated, Any

import grpc
from fastapi import APIRouter, Depends, Query
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from stash.rm.v1 import ingest_pb2
from stash_gateway.rate_limits import ImportWriter
from stash_gateway.rest_json import enum_name
from stash_gateway.routes.traces import limited_body
from stash_gateway.state import Services, Settings

router = APIRouter(prefix="/api/v1/me", tags=["account"])

SYNC_ERROR = "trace_sync_error"


@router.post(
    "/transcripts",
    summary="Upload a Claude Code or Codex transcript",
    openapi_extra={"requestBody": {"content": {"application/x-ndjson": {}}, "required": True}},
)
async def upload_transcript(
    services: Services,
    settings: Settings,
    principal: ImportWriter,
    body: Annotated[bytes, Depends(limited_body)],
    agent: Annotated[str, Query(description="claude_code, codex or auto")] = "auto",
    source_id: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
) -> Any:
    """The raw JSONL as the body: `{agent, trace_id, external_id, result}` with result created, appended or
    unchanged; a snapshot that diverges from the stored trace is refused with 409 and `error: trace_sync_error`."""
    message = ingest_pb2.UploadTranscriptRequest(
        owner_id=principal.user_id, owner_name=principal.user_name, agent=agent, data=body, source_id=source_id
    )
    try:
        response = await run_in_threadpool(services.ingest.UploadTranscript, message, timeout=settings.import_timeout_s)
    except grpc.RpcError as error:
        if error.code() is grpc.StatusCode.FAILED_PRECONDITION and (error.details() or "").startswith(SYNC_ERROR):
            return JSONResponse({"error": SYNC_ERROR, "result": "refused", "detail": error.details()}, status_code=409)
        raise
    trace = response.trace
    return {
        "agent": response.agent,
        "trace_id": trace.trace_id,
        "external_id": trace.external_id if trace.HasField("external_id") else None,
        "result": enum_name(ingest_pb2.ImportResult, trace.result),
    }
