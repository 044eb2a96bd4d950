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
    code: grpc.StatusCode = error.code()  # type: ignore[attr-defined]
    body: dict[str, str] = {"detail": error.details() or code.name}  # type: ignore[attr-defined]
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    for detail in status.details if status else []:
        bad_request = error_details_pb2.BadRequest()
        if detail.Unpack(bad_request) and bad_request.field_violations:
            body["field"] = bad_request.field_violations[0].field
    return JSONResponse(body, status_code=http_status(code.name))
