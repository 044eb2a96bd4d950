"""The OTLP receivers: `POST /api/v1/rm/otel/v1/traces` (protobuf or JSON, optionally gzip) and the
standard OTLP/gRPC `TraceService`, both forwarding to ingest's `IngestOtlpSpans`.

Limits apply to the compressed body and, separately, to what it decompresses to, so a gzip
bomb gets 413 instead of exhausting memory. Bad bodies (broken gzip, not OTLP) and bad spans get
400, oversized ones 413, each with a `google.rpc.Status` in the request's content type, as OTLP/HTTP
requires; spans rejected for reasons that affect only them are reported through OTLP's
`partial_success`. Each key's exports are rate-limited (`stash_gateway.rate_limits`): past its
allowance an export gets 429 with `Retry-After` and a RESOURCE_EXHAUSTED `google.rpc.Status` whose
`RetryInfo` names the same delay, over HTTP and gRPC alike.
"""

from __future__ import annotations

import zlib

import grpc
from fastapi import APIRouter, HTTPException, Request, Response
from google.protobuf import any_pb2, json_format
from google.protobuf.message import Message
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from sqlalchemy.orm import Session, sessionmaker
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import State

from stash.rm.v1 import ingest_pb2
from stash_common.errors import InvalidArgument, ResourceExhausted
from stash_common.server import Registrar
from stash_gateway.auth import Writer, authorize, bearer_secret
from stash_gateway.peers import Peers
from stash_gateway.rate_limits import RateLimited, RateLimits
from stash_gateway.routes import API_PREFIX
from stash_gateway.routes.traces import limited_body
from stash_gateway.settings import GatewaySettings
from stash_gateway.state import Services, Settings
from stash_gateway.status import RETRY_AFTER_S, client_message

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


_OTLP_BODY = {"schema": {"type": "string", "format": "binary"}}


@router.post(
    "/otel/v1/traces",
    summary="OTLP/HTTP trace receiver",
    response_class=Response,
    openapi_extra={"requestBody": {"content": {PROTOBUF: _OTLP_BODY, JSON: {"schema": {}}}, "required": True}},
)
async def receive_traces(request: Request, services: Services, settings: Settings, principal: Writer) -> Response:
    """Store the spans and rebuild every trace they touch; answers an ExportTraceServiceResponse."""
    media, encoding = media_type(request), content_encoding(request)
    try:
        # In a worker thread: with several replicas the buckets are in Redis, and a slow one must not stall the loop.
        await run_in_threadpool(request.app.state.rate_limits.acquire, principal.key_id, "otlp")
    except RateLimited as error:
        limited = _encode(_retry_status(error), media, 429)
        limited.headers["Retry-After"] = str(error.retry_after_s)
        return limited
    try:
        body = await limited_body(request, settings)
        if encoding == "gzip":
            body = gunzip(body, settings.otlp_max_decompressed_bytes)
    except (InvalidArgument, ResourceExhausted) as error:
        return _status_response(error.code.value, error.message, media)
    payload = {"export_trace_service_request_json" if media == JSON else "export_trace_service_request": body}
    message = ingest_pb2.IngestOtlpSpansRequest(
        owner_id=principal.user_id, source_id=request.headers.get(SOURCE_HEADER), **payload
    )
    try:
        result = await run_in_threadpool(services.ingest.IngestOtlpSpans, message, timeout=settings.otlp_timeout_s)
    except grpc.RpcError as error:
        if error.code().name not in _OTLP_HTTP_STATUS:
            raise
        return _status_response(error.code().name, client_message(settings, error), media)
    return _encode(export_response(result), media, 200)


# OTLP/HTTP's answers (the specification's, not the REST table's): bad data 400, a body over a limit 413, and
# the statuses its exporters retry, which say when (Retry-After).
_OTLP_HTTP_STATUS = {"INVALID_ARGUMENT": 400, "RESOURCE_EXHAUSTED": 413, "UNAVAILABLE": 503, "DEADLINE_EXCEEDED": 504}


def _status_response(code_name: str, message: str, media: str) -> Response:
    """OTLP's error answer: a `google.rpc.Status` with the HTTP status `_OTLP_HTTP_STATUS` gives its code."""
    status = status_pb2.Status(code=code_pb2.Code.Value(code_name), message=message)
    response = _encode(status, media, _OTLP_HTTP_STATUS[code_name])
    if response.status_code in (503, 504):
        response.headers["Retry-After"] = str(RETRY_AFTER_S)
    return response


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


class OtlpTraceService:
    """The standard OTLP/gRPC TraceService; the bearer key comes in the `authorization` metadata.

    Its one method takes the request's bytes as they came (`register_trace_service` registers it without a
    deserializer): ingest walks them span by span within its limits, so the gateway never holds the decoded
    request, and a body that is not OTLP gets ingest's INVALID_ARGUMENT naming what is wrong.
    """

    def __init__(
        self, sessions: sessionmaker[Session], peers: Peers, settings: GatewaySettings, limits: RateLimits
    ) -> None:
        self.sessions = sessions
        self.peers = peers
        self.settings = settings
        self.timeout_s = settings.otlp_timeout_s
        self.limits = limits

    def Export(self, request: bytes, context: grpc.ServicerContext) -> trace_service_pb2.ExportTraceServiceResponse:
        """Store the spans and rebuild every trace they touch, like the HTTP receiver."""
        metadata = _text_metadata(context)
        principal = authorize(self.sessions, bearer_secret(metadata.get("authorization")), write=True)
        try:
            self.limits.acquire(principal.key_id, "otlp")
        except RateLimited as error:
            context.abort_with_status(rpc_status.to_status(_retry_status(error)))
        message = ingest_pb2.IngestOtlpSpansRequest(
            owner_id=principal.user_id,
            source_id=metadata.get(SOURCE_HEADER),
            export_trace_service_request=request,
        )
        try:
            result = self.peers.ingest.IngestOtlpSpans(message, timeout=self.timeout_s)
        except grpc.RpcError as error:
            context.abort(error.code(), client_message(self.settings, error))
        return export_response(result)


def _retry_status(error: RateLimited) -> status_pb2.Status:
    """RESOURCE_EXHAUSTED with the RetryInfo that makes OTLP exporters retry after the delay."""
    retry = error_details_pb2.RetryInfo()
    retry.retry_delay.FromSeconds(error.retry_after_s)
    detail = any_pb2.Any()
    detail.Pack(retry)
    return status_pb2.Status(code=code_pb2.RESOURCE_EXHAUSTED, message=str(error), details=[detail])


def _text_metadata(context: grpc.ServicerContext) -> dict[str, str]:
    # Binary (`-bin`) entries arrive as bytes; neither the key nor the source id is one.
    return {key: value for key, value in context.invocation_metadata() if isinstance(value, str)}


def register_trace_service(app_state: State) -> Registrar:
    """A registrar for `stash_common.server.start` that adds the OTLP TraceService (once the app has started)."""

    def register(server: grpc.Server) -> list[str]:
        service = OtlpTraceService(app_state.sessions, app_state.peers, app_state.settings, app_state.rate_limits)
        name = trace_service_pb2.DESCRIPTOR.services_by_name["TraceService"].full_name
        export: grpc.RpcMethodHandler[bytes, trace_service_pb2.ExportTraceServiceResponse]
        export = grpc.unary_unary_rpc_method_handler(
            service.Export,
            request_deserializer=None,  # the bytes as sent
            response_serializer=trace_service_pb2.ExportTraceServiceResponse.SerializeToString,
        )
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(name, {"Export": export})])
        return [name]

    return register
