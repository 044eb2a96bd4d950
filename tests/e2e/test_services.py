"""Every service started for real as its own process, reached over gRPC, stopped by SIGTERM."""

import http.client
import signal
import time
from contextlib import closing
from pathlib import Path

import httpx
import pytest
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from stash_common.channels import check_health, open_channel
from support.processes import GRPC_SERVICES, free_port, start_service, wait_for_health, wait_for_http

API_NAMES = {
    "ingest": "stash.rm.v1.IngestService",
    "labeler": "stash.rm.v1.LabelerService",
    "trainer": "stash.rm.v1.TrainerService",
    "scorer": "stash.rm.v1.ScorerService",
    "gepa": "stash.rm.v1.GepaService",
}


@pytest.mark.parametrize("name", GRPC_SERVICES)
def test_service_serves_health_and_reflection_then_stops_on_sigterm(name: str, tmp_path: Path) -> None:
    port = free_port()
    process = start_service(name, {"STASH_DATA_DIR": str(tmp_path), f"STASH_{name.upper()}_PORT": str(port)})
    try:
        wait_for_health(f"127.0.0.1:{port}")
        channel = open_channel(f"127.0.0.1:{port}")
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        listing = next(stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")])))
        api_health = check_health(channel, API_NAMES[name])
        channel.close()
        assert API_NAMES[name] in {service.name for service in listing.list_services_response.service}
        assert api_health == "SERVING"
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=30)
    assert process.returncode == 0, output
    assert '"event": "stopped"' in output


def test_gateway_serves_http_and_stops_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    env = {"STASH_DATA_DIR": str(tmp_path), "STASH_GATEWAY_PORT": str(port), "STASH_GATEWAY_OTLP_GRPC_PORT": "0"}
    process = start_service("gateway", env)
    try:
        wait_for_http(f"http://127.0.0.1:{port}/healthz")
        with closing(http.client.HTTPConnection("127.0.0.1", port, timeout=10)) as connection:
            answered = status_on(connection)
            # Idle past httpx's own pool expiry: a gateway closing at the same moment dropped a client's request.
            time.sleep((httpx.Limits().keepalive_expiry or 0) + 1)
            assert status_on(connection) == answered  # the same connection: RemoteDisconnected had it been closed
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=30)
    # uvicorn drains, then re-raises the signal so the exit status still says SIGTERM.
    assert process.returncode in (0, -signal.SIGTERM), output
    assert "Application shutdown complete." in output


def status_on(connection: http.client.HTTPConnection) -> int:
    """GET /healthz on a kept-alive connection (the services are not running: any answer will do); its status."""
    connection.request("GET", "/healthz")
    response = connection.getresponse()
    response.read()
    return response.status
