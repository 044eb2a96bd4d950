"""The shared gRPC bootstrap on a real port: health, reflection, error statuses, graceful stop."""

import threading
from collections.abc import Iterator, Sequence
from typing import Any

import grpc
import pytest
from fastapi import Request
from google.rpc import error_details_pb2
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from grpc_status import rpc_status

from stash.rm.v1 import scorer_pb2, trainer_pb2
from stash_common.channels import check_health, open_channel
from stash_common.errors import InvalidArgument, NotFound
from stash_common.server import RunningServer, check_storable_request, start
from stash_gateway.status import rpc_error_response
from support.processes import free_port

SERVICE = "stash.test.Probe"


def _fail(request: bytes, _context: grpc.ServicerContext) -> bytes:
    if request == b"missing":
        raise NotFound("trace 42 does not exist")
    raise InvalidArgument("steps[0].role", "must be one of system, user, assistant, tool")


def _register(server: grpc.Server) -> Sequence[str]:
    handler = grpc.unary_unary_rpc_method_handler(_fail)
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, {"Fail": handler})])
    return [SERVICE]


@pytest.fixture
def running() -> Iterator[RunningServer]:
    server = start(_register, "127.0.0.1", 0)
    yield server
    server.stop(0)


@pytest.fixture
def channel(running: RunningServer) -> Iterator[grpc.Channel]:
    channel = open_channel(f"127.0.0.1:{running.port}")
    yield channel
    channel.close()


def test_health_reports_serving_for_server_and_service(channel: grpc.Channel) -> None:
    assert check_health(channel) == "SERVING"
    assert check_health(channel, SERVICE) == "SERVING"
    assert check_health(channel, "stash.test.Unknown") == "SERVICE_UNKNOWN"


def test_a_waiting_channel_reaches_a_server_that_starts_after_the_call() -> None:
    port = free_port()
    channel = open_channel(f"127.0.0.1:{port}", wait_for_ready=True)
    probe = channel.unary_unary(f"/{SERVICE}/Fail")
    with pytest.raises(grpc.RpcError) as refused:  # nothing listens yet: the channel backs off
        probe(b"missing", timeout=0.3)
    assert refused.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    started: list[RunningServer] = []
    timer = threading.Timer(0.5, lambda: started.append(start(_register, "127.0.0.1", port)))
    timer.start()
    try:
        with pytest.raises(grpc.RpcError) as answered:
            probe(b"missing", timeout=20)
        # The server's own answer, not UNAVAILABLE: the call waited for it to listen.
        assert answered.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        timer.join()
        channel.close()
        for server in started:
            server.stop(0)


def test_a_server_still_starting_answers_unavailable_and_health_not_serving() -> None:
    starting = start(_register, "127.0.0.1", 0, serving=False)
    channel = open_channel(f"127.0.0.1:{starting.port}")
    probe = channel.unary_unary(f"/{SERVICE}/Fail")
    try:
        with pytest.raises(grpc.RpcError) as refused:
            probe(b"missing", timeout=10)
        health_while_starting = check_health(channel)
        starting.set_serving(True)
        with pytest.raises(grpc.RpcError) as answered:
            probe(b"missing", timeout=10)
    finally:
        channel.close()
        starting.stop(0)

    assert (refused.value.code(), refused.value.details()) == (
        grpc.StatusCode.UNAVAILABLE,
        "Probe is starting; retry shortly",
    )
    assert health_while_starting == "NOT_SERVING"
    assert answered.value.code() == grpc.StatusCode.NOT_FOUND  # the servicer's own answer once started


def test_reflection_lists_the_registered_services(channel: grpc.Channel) -> None:
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    responses = stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
    names = {service.name for service in next(responses).list_services_response.service}

    assert {SERVICE, "grpc.health.v1.Health"} <= names


def test_invalid_argument_becomes_status_with_field_violation(channel: grpc.Channel) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        channel.unary_unary(f"/{SERVICE}/Fail")(b"bad", timeout=5)

    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    status = rpc_status.from_call(caught.value)
    violation = error_details_pb2.BadRequest()
    assert status.details[0].Unpack(violation)
    assert violation.field_violations[0].field == "steps[0].role"


def test_gateway_maps_statuses_to_http_with_the_reason(channel: grpc.Channel) -> None:
    request = Request({"type": "http", "method": "GET", "path": "/", "headers": []})
    for payload, expected_status, expected_detail in [
        (b"bad", 422, "steps[0].role: must be one of"),
        (b"missing", 404, "trace 42 does not exist"),
    ]:
        with pytest.raises(grpc.RpcError) as caught:
            channel.unary_unary(f"/{SERVICE}/Fail")(payload, timeout=5)
        response = rpc_error_response(request, caught.value)
        assert response.status_code == expected_status
        assert expected_detail in response.body.decode()


@pytest.mark.parametrize(
    ("request_message", "field"),
    [
        (
            scorer_pb2.ReportScoringResultRequest(
                action_scores=[
                    scorer_pb2.ActionScoreResult(step_id="s1"),
                    scorer_pb2.ActionScoreResult(step_id="s\x00"),
                ]
            ),
            "action_scores[1].step_id",
        ),
        (trainer_pb2.CompleteJobRequest(metrics={"device": "cpu\x00"}), "metrics.fields['device'].string_value"),
        (trainer_pb2.CompleteJobRequest(metrics={"a\x00": 1}), "metrics.fields (a key)"),
    ],
)
def test_unstorable_text_is_named_at_any_depth(request_message: Any, field: str) -> None:
    with pytest.raises(InvalidArgument) as refused:
        check_storable_request(request_message)

    assert refused.value.field == field


def test_storable_requests_and_bytes_payloads_pass() -> None:
    check_storable_request(trainer_pb2.CompleteJobRequest(owner_id="alice", metrics={"device": "cpu", "loss": 0.1}))
    check_storable_request(b"raw\x00bytes")  # a generic handler's undecoded request


def test_stop_reports_not_serving_before_closing(running: RunningServer, channel: grpc.Channel) -> None:
    running.health.enter_graceful_shutdown()

    assert check_health(channel) == "NOT_SERVING"
