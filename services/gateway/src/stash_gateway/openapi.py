"""What the OpenAPI document says every route can answer, and the shapes shared by all routes.

Every error the REST API returns is `ErrorBody`: `{detail, field?}` (`field` names the parameter or
JSON path at fault on 422). The errors are documented from what the code does, not route by route:
any authenticated route can answer 401 and 403, a service out of reach 503 and its deadline 504; a
route that takes an id (in its path, query or body) 404; a route with a body 400 and 413; any route 422;
a write 409; a rate-limited route 429.
Request validation by FastAPI is rendered in the same shape, so a 422 always matches the document.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Self

from fastapi import FastAPI, Request, Response
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import BaseRoute, Match

from stash_common.text_checks import check_storable, check_storable_json
from stash_gateway.routes import API_PREFIX

ERROR_SCHEMA = "ErrorBody"
OTLP_PATH = f"{API_PREFIX}/otel/v1/traces"
HEALTH_PATH = "/healthz"
RATE_LIMITED_PATHS = {f"{API_PREFIX}/traces/import", OTLP_PATH, f"{API_PREFIX}/query", "/api/v1/me/transcripts"}
DESCRIPTIONS = {
    401: "no API key, or one that matches nothing",
    403: "a read-only key that tries to write, or a disabled account",
    404: "the object does not exist or belongs to another owner",
    409: "the object is in a state that does not allow this, or already exists",
    400: "the body cannot be parsed: not UTF-8 JSON (OTLP: not an export request, as a `google.rpc.Status`)",
    413: "the request is larger than a limit allows (docs/api.md: Limits)",
    415: "OTLP: an unsupported content type or encoding",
    422: "invalid input; `field` names the parameter or JSON path at fault",
    429: "the API key's rate limit is spent; retry after `Retry-After` seconds",
    503: "a service behind the gateway is out of reach; retry after `Retry-After` seconds",
    504: "a service behind the gateway did not answer within the deadline",
}


JSON, PROTOBUF = "application/json", "application/x-protobuf"
STATUS_SCHEMA = "GoogleRpcStatus"
_RPC_STATUS = {
    "title": STATUS_SCHEMA,
    "description": "OTLP's error answer (google.rpc.Status in proto3 JSON)",
    "type": "object",
    "properties": {"code": {"type": "integer"}, "message": {"type": "string"}, "details": {"type": "array"}},
}


class ErrorBody(BaseModel):
    """Every error answer of the REST API."""

    detail: str = Field(description="what is wrong, for a person")
    field: str | None = Field(None, description="the parameter or JSON path at fault (422)")


def _in_utc(moment: datetime) -> datetime:
    # SQLite returns naive datetimes for stored UTC times; the API always writes the offset.
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


UtcDateTime = Annotated[datetime, AfterValidator(_in_utc)]


class ClosedBody(BaseModel):
    """A JSON object of a request that takes only its declared fields: another is 422 naming it, and the
    schema says so (`additionalProperties: false`), so clients learn it from the OpenAPI document."""

    model_config = ConfigDict(extra="forbid")


class RequestBody(ClosedBody):
    """Base of every JSON request body: closed, and a string holding U+0000 is 422 naming its field, since no
    store can hold it (the InvalidArgument is not a ValueError, so it leaves pydantic as it is, field and all)."""

    @model_validator(mode="after")
    def _storable(self) -> Self:
        check_storable_json(self.model_dump(), "")
        return self


def refuse_nul_in_url(request: Request) -> None:
    """A dependency of every route: U+0000 in a path or query parameter is 422 naming it, before any
    store sees it (PostgreSQL refuses NUL even in a lookup)."""
    check_storable(request.url.path, "path")
    for name, value in request.query_params.multi_items():
        check_storable(f"{name}{value}", name)


def validation_error_response(_request: Request, error: Exception) -> JSONResponse:
    """FastAPI's request validation as `ErrorBody`: the first problem, with its location as `field`."""
    assert isinstance(error, RequestValidationError)
    first = error.errors()[0]
    field = ".".join(str(part) for part in first.get("loc", ()) if part not in ("body", "query", "path", "header"))
    reason = str(first.get("msg", "invalid request"))
    # Like InvalidArgument's message: `field: reason`.
    return JSONResponse({"detail": f"{field}: {reason}" if field else reason, "field": field}, 422)


async def method_not_allowed_response(request: Request, error: Exception) -> Response:
    """405 with `Allow` listing every method of the path (Starlette names only the first route's), other
    HTTP errors as FastAPI renders them."""
    assert isinstance(error, StarletteHTTPException)
    if error.status_code != 405:
        return await http_exception_handler(request, error)
    allowed = sorted(
        method
        for route in request.app.routes
        if isinstance(route, BaseRoute) and route.matches(request.scope)[0] is not Match.NONE
        for method in getattr(route, "methods", None) or ()
    )
    return JSONResponse({"detail": "Method Not Allowed"}, 405, headers={"Allow": ", ".join(allowed)})


def document_errors(app: FastAPI) -> None:
    """Make `app.openapi()` list the error answers of every API route, all as `ErrorBody`."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = get_openapi(title=app.title, version=app.version, routes=app.routes)
            schemas = document.setdefault("components", {}).setdefault("schemas", {})
            schemas[ERROR_SCHEMA] = ErrorBody.model_json_schema()
            schemas[STATUS_SCHEMA] = _RPC_STATUS
            for path, operations in document["paths"].items():
                for method, operation in operations.items():
                    _add_errors(path, method, operation)
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to customise the document


def _add_errors(path: str, method: str, operation: dict[str, Any]) -> None:
    if path == OTLP_PATH:
        _document_otlp(operation)
        return
    if path == HEALTH_PATH:
        unhealthy = {"description": "a service is not SERVING; the body names each", "content": {JSON: {"schema": {}}}}
        operation["responses"]["503"] = unhealthy
        return
    if not path.startswith("/api/"):
        return
    statuses = {401, 403, 422, 503, 504}
    names_an_id = any(parameter["name"].endswith("id") for parameter in operation.get("parameters", []))
    if "{" in path or names_an_id or "requestBody" in operation:  # ids in the path, the query or the body
        statuses.add(404)
    if "requestBody" in operation:
        statuses |= {400, 413}
    if method != "get":
        statuses.add(409)
    if path in RATE_LIMITED_PATHS:
        statuses.add(429)
    _document(operation, statuses, ERROR_SCHEMA)


def _document(operation: dict[str, Any], statuses: set[int], schema: str, media: tuple[str, ...] = (JSON,)) -> None:
    responses = operation.setdefault("responses", {})
    for status in sorted(statuses):
        known = responses.get(str(status), {})
        content = {kind: {"schema": {"$ref": f"#/components/schemas/{schema}"}} for kind in media}
        if PROTOBUF in media:
            content[PROTOBUF] = {"schema": {"type": "string", "format": "binary"}}
        responses[str(status)] = {"description": known.get("description") or DESCRIPTIONS[status], "content": content}


def _document_otlp(operation: dict[str, Any]) -> None:
    """OTLP/HTTP answers in the request's encoding: an ExportTraceServiceResponse, or a `google.rpc.Status`."""
    operation["responses"]["200"] = {
        "description": "an ExportTraceServiceResponse (partial_success when spans were rejected)",
        "content": {PROTOBUF: {"schema": {"type": "string", "format": "binary"}}, JSON: {"schema": {"type": "object"}}},
    }
    _document(operation, {400, 413, 429}, STATUS_SCHEMA, (JSON, PROTOBUF))
    _document(operation, {401, 403, 415, 503, 504}, ERROR_SCHEMA)
