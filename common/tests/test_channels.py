"""A peer's failed call as the platform error its status means, with the peer's own message."""

from __future__ import annotations

import grpc
import pytest

from stash_common.channels import call_peer, peer_error
from stash_common.errors import FailedPrecondition, InvalidArgument, NotFound, StashError, Unavailable


class _Failed(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str | None = "why") -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str | None:
        return self._details


@pytest.mark.parametrize(
    ("code", "error", "message"),
    [
        (grpc.StatusCode.NOT_FOUND, NotFound, "why"),
        (grpc.StatusCode.FAILED_PRECONDITION, FailedPrecondition, "why"),
        (grpc.StatusCode.INVALID_ARGUMENT, InvalidArgument, "why"),
        (grpc.StatusCode.UNAVAILABLE, Unavailable, "ingest is out of reach (UNAVAILABLE); retry shortly"),
        (grpc.StatusCode.DEADLINE_EXCEEDED, Unavailable, "ingest is out of reach (DEADLINE_EXCEEDED); retry shortly"),
        (grpc.StatusCode.INTERNAL, StashError, "ingest answered INTERNAL: why"),
    ],
)
def test_peer_error_keeps_the_meaning_of_the_status(
    code: grpc.StatusCode, error: type[StashError], message: str
) -> None:
    converted = peer_error("ingest", _Failed(code))
    assert type(converted) is error and converted.message == message


def test_peer_error_names_the_code_when_the_peer_gave_no_details() -> None:
    assert peer_error("the trainer", _Failed(grpc.StatusCode.INTERNAL, None)).message == (
        "the trainer answered INTERNAL: INTERNAL"
    )


def test_call_peer_returns_the_answer_or_raises_the_platform_error() -> None:
    assert call_peer("ingest", lambda: 42) == 42

    def fail() -> int:
        raise _Failed(grpc.StatusCode.NOT_FOUND, "trace 7 does not exist")

    with pytest.raises(NotFound, match="trace 7 does not exist"):
        call_peer("ingest", fail)


def test_readiness_names_are_the_services_full_names() -> None:
    from stash.rm.v1 import gepa_pb2, ingest_pb2, labeler_pb2, scorer_pb2, trainer_pb2
    from stash_common.channels import READINESS_NAMES

    modules = {"ingest": ingest_pb2, "labeler": labeler_pb2, "trainer": trainer_pb2, "scorer": scorer_pb2}
    expected = {
        name: next(iter(module.DESCRIPTOR.services_by_name.values())).full_name for name, module in modules.items()
    }
    expected["gepa"] = gepa_pb2.DESCRIPTOR.services_by_name["GepaService"].full_name
    assert READINESS_NAMES == expected
