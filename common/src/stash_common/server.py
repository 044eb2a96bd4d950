"""gRPC server bootstrap shared by every service: health checking, reflection, errors, shutdown.

A service's `main.py` builds its servicers and calls `serve()`; this module does the rest:
the standard `grpc.health.v1.Health` service, server reflection, one interceptor that refuses
requests whose text no store can hold (U+0000 in any string field: INVALID_ARGUMENT naming it) and
turns `stash_common.errors` into statuses (with `google.rpc.BadRequest` details for bad input),
and a graceful stop on SIGTERM or SIGINT: health flips to NOT_SERVING, in-flight calls get
`grace_s` to finish, then the process exits.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Sequence
from concurrent import futures
from dataclasses import dataclass
from typing import Any

import grpc
import structlog
from google.protobuf import any_pb2
from google.protobuf.message import Message
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from grpc_status import rpc_status

from stash_common.errors import InvalidArgument, StashError
from stash_common.storable import check_storable

log = structlog.get_logger(__name__)

# Registers servicers on the server and returns their full service names (for health and reflection).
Registrar = Callable[[grpc.Server], Sequence[str]]


def to_status(error: StashError) -> status_pb2.Status:
    """The rich gRPC status for a platform error; bad input carries a BadRequest field violation."""
    status = status_pb2.Status(code=getattr(code_pb2, error.code.value), message=error.message)
    if isinstance(error, InvalidArgument):
        violation = error_details_pb2.BadRequest.FieldViolation(field=error.field, description=error.reason)
        detail = any_pb2.Any()
        detail.Pack(error_details_pb2.BadRequest(field_violations=[violation]))
        status.details.append(detail)
    return status


def check_storable_request(request: object) -> None:
    """INVALID_ARGUMENT naming a string field of `request` that holds U+0000, at any depth (`steps[2].id`).

    PostgreSQL refuses NUL even in a lookup, so an id holding one would otherwise fail as INTERNAL in
    whichever store the servicer reaches; payloads are `bytes` fields, which are not text and not checked.
    """
    pending: list[tuple[Message, str]] = [(request, "")] if isinstance(request, Message) else []
    while pending:
        message, prefix = pending.pop()
        for field, value in message.ListFields():
            name = f"{prefix}{field.name}"
            if field.message_type is not None and field.message_type.GetOptions().map_entry:
                items = [(f"{name}[{key!r}]", key, item) for key, item in value.items()]
            elif field.is_repeated:
                items = [(f"{name}[{index}]", None, item) for index, item in enumerate(value)]
            else:
                items = [(name, None, value)]
            for path, key, item in items:
                if isinstance(key, str):
                    check_storable(key, f"{name} (a key)")
                if isinstance(item, str):
                    check_storable(item, path)
                elif isinstance(item, Message):
                    pending.append((item, f"{path}."))


class ErrorInterceptor(grpc.ServerInterceptor):
    """Refuses unstorable text (`check_storable_request`) and turns a `StashError` raised by a servicer
    into its status; anything else is logged as INTERNAL."""

    def intercept_service(self, continuation: Any, handler_call_details: Any) -> Any:
        handler = continuation(handler_call_details)
        if handler is None:
            return handler
        method = handler_call_details.method
        if handler.unary_unary:
            return handler._replace(unary_unary=_guard(handler.unary_unary, method))
        if handler.unary_stream:
            return handler._replace(unary_stream=_guard_stream(handler.unary_stream, method))
        return handler


def _guard(behaviour: Callable[..., Any], method: str) -> Callable[..., Any]:
    def guarded(request: Any, context: grpc.ServicerContext) -> Any:
        try:
            check_storable_request(request)
            return behaviour(request, context)
        except StashError as error:
            context.abort_with_status(rpc_status.to_status(to_status(error)))
        except Exception:
            log.exception("unhandled error", method=method)
            raise

    return guarded


def _guard_stream(behaviour: Callable[..., Any], method: str) -> Callable[..., Any]:
    def guarded(request: Any, context: grpc.ServicerContext) -> Any:
        try:
            check_storable_request(request)
            yield from behaviour(request, context)
        except StashError as error:
            context.abort_with_status(rpc_status.to_status(to_status(error)))
        except Exception:
            log.exception("unhandled error", method=method)
            raise

    return guarded


@dataclass
class RunningServer:
    """A started gRPC server with its health service, bound to `port`."""

    server: grpc.Server
    health: health.HealthServicer
    service_names: Sequence[str]
    port: int

    def set_serving(self, serving: bool) -> None:
        """Report the server and its services SERVING, or NOT_SERVING while they cannot serve."""
        status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        for name in ["", *self.service_names]:
            self.health.set(name, status)

    def stop(self, grace_s: float) -> None:
        """Report NOT_SERVING, then let in-flight calls finish for up to `grace_s` seconds."""
        self.health.enter_graceful_shutdown()
        self.server.stop(grace_s).wait()


def start(
    register: Registrar,
    host: str,
    port: int,
    max_workers: int = 16,
    serving: bool = True,
) -> RunningServer:
    """Start a server with health checking and reflection; port 0 picks a free port.

    With `serving` false the server answers but reports NOT_SERVING until `set_serving(True)`.
    """
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers),
        interceptors=[ErrorInterceptor()],
        options=[("grpc.max_receive_message_length", 64 * 1024 * 1024)],
    )
    service_names = list(register(server))
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        [*service_names, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME],
        server,
    )
    bound = server.add_insecure_port(f"{host}:{port}")
    server.start()
    running = RunningServer(server, health_servicer, service_names, bound)
    running.set_serving(serving)
    return running


def serve(
    service: str,
    register: Registrar,
    host: str,
    port: int,
    grace_s: float = 10.0,
    on_stop: Callable[[], None] | None = None,
    prepare: Callable[[], None] | None = None,
) -> None:
    """Run a service's gRPC server until SIGTERM or SIGINT, then shut down gracefully.

    `prepare` runs once the server listens, while it reports NOT_SERVING (migrating its tables, starting
    its workers); the server reports SERVING when it returns. `on_stop` runs after the server has
    drained: it stops the service's background workers.
    """
    running = start(register, host, port, serving=prepare is None)
    log.info("serving", service=service, host=host, port=running.port, services=list(running.service_names))
    stopping = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopping.set())
    if prepare is not None:
        _prepare(service, running, prepare)
    stopping.wait()
    log.info("stopping", service=service, grace_s=grace_s)
    running.stop(grace_s)
    if on_stop is not None:
        on_stop()
    log.info("stopped", service=service)


def _prepare(service: str, running: RunningServer, prepare: Callable[[], None]) -> None:
    """Run `prepare` while the server reports NOT_SERVING, then report SERVING; a failure stops the server."""
    try:
        prepare()
    except BaseException:
        running.stop(0)
        raise
    running.set_serving(True)
    log.info("ready", service=service)
