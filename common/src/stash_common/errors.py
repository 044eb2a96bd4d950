"""Errors that mirror gRPC status codes, and the one table that maps them to HTTP.

Domain code raises these; the gRPC interceptor turns them into statuses and the gateway
turns statuses into HTTP responses. Neither this module nor domain code imports grpc.
"""

from __future__ import annotations

from enum import StrEnum


class Code(StrEnum):
    """The gRPC status codes the platform uses, by their gRPC names."""

    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    NOT_FOUND = "NOT_FOUND"
    ALREADY_EXISTS = "ALREADY_EXISTS"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    FAILED_PRECONDITION = "FAILED_PRECONDITION"
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"
    UNAVAILABLE = "UNAVAILABLE"
    DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"
    UNIMPLEMENTED = "UNIMPLEMENTED"
    INTERNAL = "INTERNAL"


# The gateway's single translation from a status code to an HTTP status, like the
# Collector's GetHTTPStatusCodeFromStatus. Anything not listed is a 500.
HTTP_STATUS_BY_CODE: dict[Code, int] = {
    Code.INVALID_ARGUMENT: 422,
    Code.NOT_FOUND: 404,
    Code.ALREADY_EXISTS: 409,
    Code.PERMISSION_DENIED: 403,
    Code.UNAUTHENTICATED: 401,
    Code.FAILED_PRECONDITION: 409,
    Code.RESOURCE_EXHAUSTED: 413,
    Code.UNAVAILABLE: 503,
    Code.DEADLINE_EXCEEDED: 504,
    Code.UNIMPLEMENTED: 501,
    Code.INTERNAL: 500,
}


def http_status(code: Code | str) -> int:
    """The HTTP status for a gRPC code name; unknown codes are server errors."""
    try:
        return HTTP_STATUS_BY_CODE[Code(code)]
    except ValueError:
        return 500


class StashError(Exception):
    """Base of every error the platform reports to a caller.

    `permanent` follows the Collector's IsPermanent: retrying a permanent error
    with the same input fails the same way.
    """

    code: Code = Code.INTERNAL
    permanent: bool = True

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidArgument(StashError):
    """The caller sent something wrong; `field` names it (a JSON path or a parameter)."""

    code = Code.INVALID_ARGUMENT

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}" if field else reason)
        self.field = field
        self.reason = reason


class NotFound(StashError):
    """The object does not exist or belongs to another owner (never say which)."""

    code = Code.NOT_FOUND


class AlreadyExists(StashError):
    """An object with that identity already exists."""

    code = Code.ALREADY_EXISTS


class PermissionDenied(StashError):
    """The caller is known but may not do this (a read-only key writing)."""

    code = Code.PERMISSION_DENIED


class Unauthenticated(StashError):
    """No credentials, or credentials that match nothing."""

    code = Code.UNAUTHENTICATED


class FailedPrecondition(StashError):
    """The object is in a state that does not allow this (retrying a running model)."""

    code = Code.FAILED_PRECONDITION


class ResourceExhausted(StashError):
    """A size or rate limit was exceeded."""

    code = Code.RESOURCE_EXHAUSTED


class Unavailable(StashError):
    """A dependency is down; the same request may succeed later."""

    code = Code.UNAVAILABLE
    permanent = False


class Unimplemented(StashError):
    """The API declares this call but the service does not perform it yet; the message says which issue builds it."""

    code = Code.UNIMPLEMENTED


class ConfigError(Exception):
    """A configuration value is missing or invalid; the message names the environment variable."""
