"""Client side of the services' gRPC: channels and health checks."""

from __future__ import annotations

from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


def open_channel(address: str) -> grpc.Channel:
    """An insecure channel to a peer inside the platform's network."""
    return grpc.insecure_channel(address, options=[("grpc.max_receive_message_length", 64 * 1024 * 1024)])


def check_health(channel: grpc.Channel, service: str = "", timeout_s: float = 2.0) -> str:
    """The peer's health status name (SERVING, NOT_SERVING, …), or UNREACHABLE when it does not answer."""
    # typeshed's HealthStub declares no methods (grpc attaches them per channel), hence Any.
    stub: Any = health_pb2_grpc.HealthStub(channel)
    try:
        response = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout_s)
    except grpc.RpcError as error:
        if error.code() == grpc.StatusCode.NOT_FOUND:
            return "SERVICE_UNKNOWN"
        return "UNREACHABLE"
    return health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)
