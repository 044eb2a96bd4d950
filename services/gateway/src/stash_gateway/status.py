"""How the gateway answers errors: platform errors and gRPC statuses become HTTP responses.

The one table lives in `stash_common.errors.HTTP_STATUS_BY_CODE`; this module only reads
the status (and its `google.rpc.BadRequest` details) and renders `{"detail", "field"?}`.

A status a service sent carries its own message, written for callers. A status the gateway's
channel made up (the service is down, or the deadline passed) carries gRPC's transport text with
internal addresses: the caller gets a clean message naming the service, the text goes to the log.
The gateway's own stores failing (its database, the rate limits' Redis) are answered like a service's:
503 naming only the store (`stash_common.outages`). Every 503 says when to retry (Retry-After), and
any other failure is a JSON 500 without the exception's text.
"""

from __future__ import annotations

import re

import grpc
import structlog
from fastapi import Request
from fastapi.responses import JSONResponse
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from stash_common.channels import sent_by_service
from stash_common.errors import Code, InvalidArgument, StashError, http_status
from stash_common.outages import store_outage
from stash_common.settings import ServiceSettings
from stash_gateway.peers import PEER_NAMES

log = structlog.get_logger(__name__)
_OUT_OF_REACH = {
    grpc.StatusCode.UNAVAILABLE: "is unavailable; retry shortly",
    grpc.StatusCode.DEADLINE_EXCEEDED: "did not answer within the gateway's deadline; retry shortly",
}
RETRY_AFTER_S = 1


def stash_error_response(_request: Request, error: Exception) -> JSONResponse:
    """A platform error raised inside the gateway itself."""
    assert isinstance(error, StashError)
    body: dict[str, str] = {"detail": error.message}
    if isinstance(error, InvalidArgument):
        body["field"] = error.field
    return error_response(body, error.code)


def unexpected_error_response(request: Request, error: Exception) -> JSONResponse:
    """Any other exception: 503 when a store of the gateway's is out of reach, else a JSON 500; its text
    (hosts, SQL) only in the log."""
    outage = store_outage(error)
    if outage is None:
        log.error("unhandled error", path=request.url.path, exc_info=error)
        return error_response({"detail": "an internal error; the gateway's log has the details"}, Code.INTERNAL)
    log.warning("store unreachable", path=request.url.path, error=str(error).splitlines()[0])
    return stash_error_response(request, outage)


def error_response(body: dict[str, str], code: Code | str) -> JSONResponse:
    """The HTTP answer for a status code's body: 401 names its scheme, 503 when to retry."""
    status = http_status(code)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    if status == 503:
        headers = {"Retry-After": str(RETRY_AFTER_S)}
    return JSONResponse(body, status_code=status, headers=headers)


def rpc_error_response(request: Request, error: Exception) -> JSONResponse:
    """A status returned by a service, translated with the one code table."""
    assert isinstance(error, grpc.RpcError)
    code = error.code()
    if code in _OUT_OF_REACH and not sent_by_service(error):
        return _out_of_reach_response(request.app.state.settings, code, error.details() or "")
    body: dict[str, str] = {"detail": error.details() or code.name}
    field = _violated_field(error)
    if field is not None:
        body["field"] = field
    return error_response(body, code.name)


def _violated_field(error: grpc.RpcError) -> str | None:
    """The field a `google.rpc.BadRequest` detail of the status names, if it has one."""
    # The details travel in the trailing metadata, which only a finished call carries.
    status = rpc_status.from_call(error) if isinstance(error, grpc.Call) else None
    if status is None:
        return None
    for detail in status.details:
        bad_request = error_details_pb2.BadRequest()
        if detail.Unpack(bad_request) and bad_request.field_violations:
            return str(bad_request.field_violations[0].field)
    return None


def _out_of_reach_response(settings: ServiceSettings, code: grpc.StatusCode, details: str) -> JSONResponse:
    """503 or 504 naming the service out of reach; gRPC's own text (addresses included) only in the log."""
    response = error_response({"detail": _out_of_reach_message(settings, code, details)}, code.name)
    response.headers["Retry-After"] = str(RETRY_AFTER_S)
    return response


def client_message(settings: ServiceSettings, error: grpc.RpcError) -> str:
    """What a caller may read of a failed call to a service (OTLP/gRPC answers with it): the service's own
    message, or for a transport failure a clean one naming the service."""
    details = error.details() or ""
    if error.code() in _OUT_OF_REACH and not sent_by_service(error):
        return _out_of_reach_message(settings, error.code(), details)
    return details


def _out_of_reach_message(settings: ServiceSettings, code: grpc.StatusCode, details: str) -> str:
    service = unreachable_service(settings, details)
    log.warning("service out of reach", service=service, code=code.name, details=details)
    name = f"the {service} service" if service else "a service behind the gateway"
    return f"{name} {_OUT_OF_REACH[code]}"


def unreachable_service(settings: ServiceSettings, details: str) -> str | None:
    """The peer whose address gRPC's transport text names (by host and port, else by port), if any."""
    addresses = {name: settings.address_of(name) for name in PEER_NAMES}
    for name, address in addresses.items():
        if address in details:
            return name
    for name, address in addresses.items():
        port = address.rpartition(":")[2]
        if re.search(rf":{re.escape(port)}\b", details):
            return name
    return None
