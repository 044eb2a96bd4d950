"""Client side of the services' gRPC: channels, health checks, and a peer's failures as platform errors.

Peers start in any order and restart on their own, so a channel reconnects quickly (at most a second
between attempts instead of gRPC's default of two minutes). A background worker's channel also waits
for a reconnecting peer within its call's deadline (`wait_for_ready`) instead of failing at once: the
labeler's first pass after a restart must not fail against an ingest that is a moment from listening.
Request paths a person waits on (the gateway) keep failing fast, so an outage is answered with 503 now.

A health check can also ask which stack the peer belongs to (`stash_common.instance`): a peer that reports
another stack's id is ANOTHER_STACK, not SERVING, whatever its health.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from stash_common.errors import FailedPrecondition, InvalidArgument, NotFound, StashError, Unavailable
from stash_common.instance import STACK_ID_METADATA
from stash_common.settings import ServiceSettings

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
_RECONNECT_OPTIONS = [("grpc.initial_reconnect_backoff_ms", 100), ("grpc.max_reconnect_backoff_ms", 1000)]
# A method config matching every method of every service on the channel.
_WAIT_FOR_READY = json.dumps({"methodConfig": [{"name": [{}], "waitForReady": True}]})
_OUT_OF_REACH = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
# Every status a service sends goes through `stash_common.server.to_status`, which sets this trailer; a status
# without it was made by the caller's own channel (the peer is down, the deadline passed).
_SENT_BY_SERVICE = "grpc-status-details-bin"
ANOTHER_STACK = "ANOTHER_STACK"
# Each service's readiness, by the gRPC health name of its service (see `stash_common.readiness`).
READINESS_NAMES: dict[str, str] = {
    "ingest": "stash.rm.v1.IngestService",
    "labeler": "stash.rm.v1.LabelerService",
    "trainer": "stash.rm.v1.TrainerService",
    "scorer": "stash.rm.v1.ScorerService",
    "gepa": "stash.rm.v1.GepaService",
}

Response = TypeVar("Response")


def open_channel(address: str, wait_for_ready: bool = False) -> grpc.Channel:
    """An insecure channel to a peer inside the platform's network; see the module docstring for `wait_for_ready`."""
    options: list[tuple[str, Any]] = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES), *_RECONNECT_OPTIONS]
    if wait_for_ready:
        options.append(("grpc.service_config", _WAIT_FOR_READY))
    return grpc.insecure_channel(address, options=options)


def peer_channel(settings: ServiceSettings, peer: str) -> grpc.Channel:
    """A background worker's channel to a peer service: it waits for a reconnecting peer."""
    return open_channel(settings.address_of(peer), wait_for_ready=True)


def check_health(channel: grpc.Channel, service: str = "", timeout_s: float = 2.0, stack_id: str = "") -> str:
    """The peer's health status name (SERVING, NOT_SERVING, …), or UNREACHABLE when it does not answer; with a
    `stack_id`, ANOTHER_STACK when the peer reports a different one."""
    # typeshed's HealthStub declares no methods (grpc attaches them per channel), hence Any.
    stub: Any = health_pb2_grpc.HealthStub(channel)
    try:
        response, call = stub.Check.with_call(health_pb2.HealthCheckRequest(service=service), timeout=timeout_s)
    except grpc.RpcError as error:
        if error.code() == grpc.StatusCode.NOT_FOUND:
            return "SERVICE_UNKNOWN"
        return "UNREACHABLE"
    if stack_id and dict(call.initial_metadata() or ()).get(STACK_ID_METADATA) != stack_id:
        return ANOTHER_STACK
    return health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)


def sent_by_service(error: grpc.RpcError) -> bool:
    """Whether a failed call's status came from the service (its own message) rather than from the channel
    (whose text names addresses)."""
    trailers: tuple[tuple[str, str | bytes], ...] = (
        (error.trailing_metadata() or ()) if isinstance(error, grpc.Call) else ()
    )
    return any(key == _SENT_BY_SERVICE for key, _ in trailers)


def call_peer(peer: str, send: Callable[[], Response]) -> Response:
    """`send()`, with a failed call raised as the platform error of `peer_error`."""
    try:
        return send()
    except grpc.RpcError as error:
        raise peer_error(peer, error) from None


def peer_error(peer: str, error: grpc.RpcError) -> StashError:
    """The platform error for a failed call to `peer` (e.g. "ingest"), keeping the peer's own message.

    NOT_FOUND, FAILED_PRECONDITION and INVALID_ARGUMENT keep their meaning; an unreachable or slow peer
    is Unavailable (retryable); any other status is a permanent StashError naming the peer and code. The text
    of a status the channel made (the peer is down) names addresses, so the message keeps only its code.
    """
    code = error.code()
    if code in _OUT_OF_REACH and not sent_by_service(error):
        return Unavailable(f"{peer} is out of reach ({code.name}); retry shortly")
    details = error.details() or code.name
    if code == grpc.StatusCode.NOT_FOUND:
        return NotFound(details)
    if code == grpc.StatusCode.FAILED_PRECONDITION:
        return FailedPrecondition(details)
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return InvalidArgument("", details)
    message = f"{peer} answered {code.name}: {details}"
    return Unavailable(message) if code in _OUT_OF_REACH else StashError(message)
