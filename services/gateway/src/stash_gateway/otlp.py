"""The OTLP receivers: `POST /api/v1/rm/otel/v1/traces` (protobuf or JSON, optionally gzip) and the
standard OTLP/gRPC `TraceService`, both forwarding to ingest's `IngestOtlpSpans`.

Limits apply to the compressed body and, separately, to what it decompresses to, so a gzip
bomb gets 413 instead of exhausting memory. Bad spans get 400 with a `google.rpc.Status` in
the request's content type; spans rejected for reasons that affect only them are reported
through OTLP's `partial_success`.
"""

from __future__ import annotations

import zlib
from typing import Annotated

import grpc
from fastapi import APIRouter, Depends, HTTPException, Request, Response
from google.protobuf import json_format
from google.protobuf.message import Message
from google.rpc import code_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from sqlalchemy.orm import Session, sessionmaker
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import State

from stash.rm.v1 import ingest_pb2
from stash_common.errors import InvalidArgument, ResourceExhausted
from stash_common.server import Registrar
from stash_gateway.auth import Writer, authorize, bearer_secret
from stash_gateway.peers import Peers
from stash_gateway.routes import API_PREFIX
from stash_gateway.routes.traces import limited_body
from stash_gateway.state import Services, Settings

router = APIRouter(prefix=API_PREFIX, tags=["opentelemetry"])
PROTOBUF = "application/x-protobuf"
JSON = "application/json"
SOURCE_HEADER = "x-stash-trace-source"


def media_type(request: Request) -> str:
    """The request's OTLP encoding; anything but protobuf or JSON is 415."""
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media not in (PROTOBUF, JSON):
        raise HTTPException(415, f"unsupported content type {media!r}; send {PROTOBUF} or {JSON}")
    return media


def content_encoding(request: Request) -> str:
    """`gzip` or `identity`; any other encoding is 415."""
    encoding = request.headers.get("content-encoding", "identity").strip().lower() or "identity"
    if encoding not in ("gzip", "identity"):
        raise HTTPException(415, f"unsupported content encoding {encoding!r}; send gzip or identity")
    return encoding


def gunzip(body: bytes, limit: int) -> bytes:
    """Decompress a gzip body, stopping as soon as the output would exceed `limit` bytes."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        data = inflater.decompress(body, limit + 1)
    except zlib.error as error:
        raise InvalidArgument("body", f"is not valid gzip ({error})") from None
    if len(data) > limit or inflater.unconsumed_tail:
        raise ResourceExhausted(f"decompressed body exceeds the {limit}-byte limit")
    if not inflater.eof:
        raise InvalidArgument("body", "gzip stream is truncated")
    return data


@router.post("/otel/v1/traces", summary="OTLP/HTTP trace receiver", response_class=Response)
async def receive_traces(
    request: Request,
    services: Services,
    settings: Settings,
    principal: Writer,
    body: Annotated[bytes, Depends(limited_body)],
) -> Response:
    """Store the spans and rebuild every trace they touch; answers an ExportTraceServiceResponse."""
    media, encoding = media_type(request), content_encoding(request)
    if encoding == "gzip":
        body = gunzip(body, settings.otlp_max_decompressed_bytes)
    payload = {"export_trace_service_request_json" if media == JSON else "export_trace_service_request": body}
    message = ingest_pb2.IngestOtlpSpansRequest(
        owner_id=principal.user_id, source_id=request.headers.get(SOURCE_HEADER), **payload
    )
    try:
        result = await run_in_threadpool(services.ingest.IngestOtlpSpans, message, timeout=settings.otlp_timeout_s)
    except grpc.RpcError as error:
        if error.code() != grpc.StatusCode.INVALID_ARGUMENT:
            raise
        status = status_pb2.Status(code=code_pb2.INVALID_ARGUMENT, message=error.details())
        return _encode(status, media, 400)
    return _encode(export_response(result), media, 200)


def export_response(result: ingest_pb2.IngestOtlpSpansResponse) -> trace_service_pb2.ExportTraceServiceResponse:
    """The OTLP answer: empty on full success, `partial_success` when some spans were rejected."""
    response = trace_service_pb2.ExportTraceServiceResponse()
    if result.rejected_spans or result.error_message:
        response.partial_success.rejected_spans = result.rejected_spans
        response.partial_success.error_message = result.error_message
    return response


def _encode(message: Message, media: str, status_code: int) -> Response:
    if media == PROTOBUF:
        return Response(message.SerializeToString(), status_code=status_code, media_type=PROTOBUF)
    return Response(json_format.MessageToJson(message, indent=None), status_code=status_code, media_type=JSON)


class OtlpTraceService(trace_service_pb2_grpc.TraceServiceServicer):
    """The standard OTLP/gRPC TraceService; the bearer key comes in the `authorization` metadata."""

    def __init__(self, sessions: sessionmaker[Session], peers: Peers, timeout_s: float) -> None:
        self.sessions = sessions
        self.peers = peers
        self.timeout_s = timeout_s

    def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        """Store the spans and rebuild every trace they touch, like the HTTP receiver."""
        metadata = _text_metadata(context)
        principal = authorize(self.sessions, bearer_secret(metadata.get("authorization")), write=True)
        message = ingest_pb2.IngestOtlpSpansRequest(
            owner_id=principal.user_id,
            source_id=metadata.get(SOURCE_HEADER),
            export_trace_service_request=request.SerializeToString(),
        )
        try:
            result = self.peers.ingest.IngestOtlpSpans(message, timeout=self.timeout_s)
        except grpc.RpcError as error:
            context.abort(error.code(), error.details() or "")
        return export_response(result)


def _text_metadata(context: grpc.ServicerContext) -> dict[str, str]:
    # Binary (`-bin`) entries arrive as bytes; neither the key nor the source id is one.
    return {key: value for key, value in context.invocation_metadata() if isinstance(value, str)}


def register_trace_service(app_state: State) -> Registrar:
    """A registrar for `stash_common.server.start` that adds the OTLP TraceService (once the app has started)."""

    def register(server: grpc.Server) -> list[str]:
        service = OtlpTraceService(app_state.sessions, app_state.peers, app_state.settings.otlp_timeout_s)
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(service, server)
        return [trace_service_pb2.DESCRIPTOR.services_by_name["TraceService"].full_name]

    return register
