"""The one table from gRPC codes to HTTP statuses."""

import pytest

from stash_common.errors import Code, FailedPrecondition, InvalidArgument, NotFound, Unavailable, http_status


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (Code.NOT_FOUND, 404),
        (Code.INVALID_ARGUMENT, 422),
        (Code.FAILED_PRECONDITION, 409),
        (Code.UNAVAILABLE, 503),
        (Code.UNAUTHENTICATED, 401),
        (Code.PERMISSION_DENIED, 403),
        (Code.RESOURCE_EXHAUSTED, 413),
    ],
)
def test_http_status_follows_the_table(code: Code, status: int) -> None:
    assert http_status(code) == status
    assert http_status(code.value) == status


def test_http_status_is_500_for_unknown_codes() -> None:
    assert http_status("DATA_LOSS") == 500


def test_invalid_argument_message_names_the_field() -> None:
    error = InvalidArgument("steps[2].role", "must be one of system, user, assistant, tool")

    assert str(error) == "steps[2].role: must be one of system, user, assistant, tool"
    assert error.code is Code.INVALID_ARGUMENT


def test_only_unavailable_is_retryable() -> None:
    assert Unavailable("down").permanent is False
    assert NotFound("gone").permanent and FailedPrecondition("busy").permanent
