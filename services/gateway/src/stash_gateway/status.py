"""How the gateway answers errors: platform errors and gRPC statuses become HTTP responses.

The one table lives in `stash_common.errors.HTTP_STATUS_BY_CODE`; this module only reads
the status (and its `google.rpc.BadRequest` details) and renders `{"detail", "field"?}`.
"""

from __future__ import annotations

import grpc
from fastapi import Request
from fastapi.responses import JSONResponse
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from stash_common.errors import InvalidArgument, StashError, http_status


def stash_error_response(_request: Request, error: Exception) -> JSONResponse:
    """A platform error raised inside the gateway itself."""
    assert isinstance(error, StashError)
    body: dict[str, str] = {"detail": error.message}
    if isinstance(error, InvalidArgument):
        body["field"] = error.field
    headers = {"WWW-Authenticate": "Bearer"} if http_status(error.code) == 401 else None
    return JSONResponse(body, status_code=http_status(error.code), headers=headers)


def rpc_error_response(_request: Request, error: Exception) -> JSONResponse:
    """A status returned by a service, translated with the one code table."""
    assert isinstance(error, grpc.RpcError)
    code = error.code()
    body: dict[str, str] = {"detail": error.details() or code.name}
    field = _violated_field(error)
    if field is not None:
        body["field"] = field
    return JSONResponse(body, status_code=http_status(code.name))


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
