"""gRPC server bootstrap shared by every service: health checking, reflection, errors, shutdown.

A service's `main.py` builds its servicers and calls `serve()`; this module does the rest:
the standard `grpc.health.v1.Health` service (liveness as "", readiness by service name, see
`stash_common.readiness`; each answer carries the stack id, see `stash_common.instance`), server
reflection, one interceptor that refuses requests whose text no store can hold (U+0000 in any string
field: INVALID_ARGUMENT naming it) and turns `stash_common.errors` into statuses (with
`google.rpc.BadRequest` details for bad input) and a store outage into UNAVAILABLE (`stash_common.outages`),
and a graceful stop on SIGTERM or SIGINT: health flips to NOT_SERVING, in-flight calls get
`grace_s` to finish, then the process exits. Until the service has started (`serve`'s `prepare`: migrations,
workers) health reports NOT_SERVING and every call but health's is answered UNAVAILABLE, which callers retry:
a servicer whose tables are not migrated yet would fail as INTERNAL. A port already in use stops the start with
a message naming what holds it (`stash_common.listeners`): gRPC's SO_REUSEPORT is switched off.
"""

from __future__ import annotations

import gc
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
from sqlalchemy import Engine

from stash_common.errors import InvalidArgument, StashError, Unavailable
from stash_common.instance import STACK_ID_METADATA, hold
from stash_common.listeners import check_free, port_in_use
from stash_common.outages import DATABASE, store_outage
from stash_common.readiness import StoreWatch, database_check
from stash_common.settings import ServiceSettings
from stash_common.text_checks import check_storable

log = structlog.get_logger(__name__)

# Registers servicers on the server and returns their full service names (for health and reflection).
Registrar = Callable[[grpc.Server], Sequence[str]]
HEALTH_METHODS = f"/{health_pb2.DESCRIPTOR.services_by_name['Health'].full_name}/"


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
    """Answers UNAVAILABLE until `started` is set (health excepted), refuses unstorable text
    (`check_storable_request`) and turns a `StashError` raised by a servicer into its status, a store outage
    into UNAVAILABLE; anything else is logged and answered INTERNAL."""

    def __init__(self, started: threading.Event) -> None:
        self.started = started

    def intercept_service(self, continuation: Any, handler_call_details: Any) -> Any:
        handler = continuation(handler_call_details)
        if handler is None:
            return handler
        method = handler_call_details.method
        started = None if method.startswith(HEALTH_METHODS) else self.started
        if handler.unary_unary:
            return handler._replace(unary_unary=_guard(handler.unary_unary, method, started))
        if handler.unary_stream:
            return handler._replace(unary_stream=_guard_stream(handler.unary_stream, method, started))
        return handler


def _refuse_until_started(method: str, started: threading.Event | None) -> None:
    """Unavailable while the server is starting (`started` not set): its servicers may not work yet."""
    if started is not None and not started.is_set():
        service = method.split("/")[1].rsplit(".", 1)[-1]
        raise Unavailable(f"{service} is starting; retry shortly")


def _guard(behaviour: Callable[..., Any], method: str, started: threading.Event | None) -> Callable[..., Any]:
    def guarded(request: Any, context: grpc.ServicerContext) -> Any:
        try:
            _refuse_until_started(method, started)
            check_storable_request(request)
            return behaviour(request, context)
        except Exception as error:
            _abort(error, method, context)

    return guarded


def _guard_stream(behaviour: Callable[..., Any], method: str, started: threading.Event | None) -> Callable[..., Any]:
    def guarded(request: Any, context: grpc.ServicerContext) -> Any:
        try:
            _refuse_until_started(method, started)
            check_storable_request(request)
            yield from behaviour(request, context)
        except Exception as error:
            _abort(error, method, context)

    return guarded


def _abort(error: Exception, method: str, context: grpc.ServicerContext) -> None:
    """End the call with the status of a platform error or a store outage, or INTERNAL for anything else (logged
    with its traceback). An exception's own text names hosts and may quote SQL: the log has it, the caller not."""
    # The servicer ended the call itself (`context.abort`); grpcio has `code()` since 1.38, its stubs not yet.
    if context.code() is not None:  # type: ignore[attr-defined]
        raise error
    if not isinstance(error, StashError):
        outage = store_outage(error)
        if outage is None:
            log.exception("unhandled error", method=method)
            context.abort(grpc.StatusCode.INTERNAL, "an internal error; the service's log has the details")
        log.warning("store unreachable", method=method, error=str(error).splitlines()[0])
        error = outage
    context.abort_with_status(rpc_status.to_status(to_status(error)))


class IdentifiedHealth(health.HealthServicer):
    """The standard health service; every Check answer carries the server's stack id in its initial metadata."""

    def __init__(self, stack_id: str) -> None:
        super().__init__()
        self.stack_id = stack_id

    def Check(self, request: health_pb2.HealthCheckRequest, context: grpc.ServicerContext) -> Any:
        """The status of `request.service`, sent after the stack id."""
        context.send_initial_metadata(((STACK_ID_METADATA, self.stack_id),))
        return super().Check(request, context)


@dataclass
class RunningServer:
    """A started gRPC server with its health service, bound to `port`; its services answer calls once `started`."""

    server: grpc.Server
    health: health.HealthServicer
    service_names: Sequence[str]
    port: int
    started: threading.Event

    def set_serving(self, serving: bool) -> None:
        """Report the server and its services SERVING, or NOT_SERVING while they cannot serve."""
        self.set_started(serving)
        self.set_ready(serving)

    def set_started(self, started: bool) -> None:
        """Answer the services' calls and report the server (liveness) SERVING, or answer them UNAVAILABLE
        and report NOT_SERVING; the services' readiness is left as it is."""
        if started:
            self.started.set()
        else:
            self.started.clear()
        self.health.set("", _status(started))

    def set_ready(self, ready: bool) -> None:
        """Report the services (readiness) SERVING or NOT_SERVING; the server itself (liveness) is left as it is."""
        for name in self.service_names:
            self.health.set(name, _status(ready))

    def stop(self, grace_s: float) -> None:
        """Report NOT_SERVING, then let in-flight calls finish for up to `grace_s` seconds."""
        self.health.enter_graceful_shutdown()
        self.server.stop(grace_s).wait()


def _status(serving: bool) -> Any:
    return health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING


def start(
    register: Registrar,
    host: str,
    port: int,
    max_workers: int = 16,
    serving: bool = True,
    port_variable: str = "its port setting",
    stack_id: str = "",
) -> RunningServer:
    """Start a server with health checking and reflection; port 0 picks a free port.

    With `serving` false the server listens but reports NOT_SERVING, and answers every call but health's
    UNAVAILABLE, until `set_serving(True)`. A port in use is PortInUse naming `port_variable`; health answers
    carry `stack_id`.
    """
    check_free(host, port, port_variable)
    started = threading.Event()
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers),
        interceptors=[ErrorInterceptor(started)],
        # Without SO_REUSEPORT a second server on the port fails to bind instead of sharing its connections.
        options=[("grpc.max_receive_message_length", 64 * 1024 * 1024), ("grpc.so_reuseport", 0)],
    )
    service_names = list(register(server))
    health_servicer = IdentifiedHealth(stack_id)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        [*service_names, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME],
        server,
    )
    try:
        bound = server.add_insecure_port(f"{host}:{port}")
    except RuntimeError:  # taken between the check and the bind
        raise port_in_use(host, port, port_variable) from None
    server.start()
    running = RunningServer(server, health_servicer, service_names, bound, started)
    running.set_serving(serving)
    return running


def serve(
    settings: ServiceSettings,
    port: int,
    register: Registrar,
    database: Engine,
    on_stop: Callable[[], None] | None = None,
    prepare: Callable[[], None] | None = None,
    grace_s: float = 10.0,
) -> None:
    """Run a service's gRPC server until SIGTERM or SIGINT, then shut down gracefully.

    In the embedded profile the service first takes its lock in the data directory (`stash_common.instance`).
    `prepare` runs once the server listens, while it reports NOT_SERVING and answers calls UNAVAILABLE (migrating
    its tables, starting its workers); the server answers calls and reports SERVING when it returns, and its
    services ready while `database` answers.
    `on_stop` runs after the server has drained: it stops the service's background workers.
    """
    service = settings.service
    if settings.profile == "embedded":
        hold(settings.data_dir, service, settings.stack_id)
    variable = f"STASH_{service.upper()}_PORT"
    running = start(register, settings.host, port, serving=False, port_variable=variable, stack_id=settings.stack_id)
    log.info("serving", service=service, host=settings.host, port=running.port, services=list(running.service_names))
    stopping = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopping.set())
    watch = StoreWatch({DATABASE: database_check(database)}, running.set_ready)
    _prepare(service, running, prepare or (lambda: None), watch)
    stopping.wait()
    log.info("stopping", service=service, grace_s=grace_s)
    watch.stop()
    running.stop(grace_s)
    if on_stop is not None:
        on_stop()
    log.info("stopped", service=service)


def freeze_start_up() -> None:
    """Put every object start-up made (modules, settings, the engine) out of the garbage collector's reach: each
    full collection walks them all again, which is much of a service's CPU when a call or a worker builds many
    objects (100k steps parsed or labelled). Call it from `prepare`, before any call or worker makes objects."""
    gc.collect()
    gc.freeze()


def _prepare(service: str, running: RunningServer, prepare: Callable[[], None], watch: StoreWatch) -> None:
    """Run `prepare` while the server reports NOT_SERVING, then let it answer calls and report it SERVING, ready
    while its stores answer; a failure stops the server."""
    try:
        prepare()
    except BaseException:
        running.stop(0)
        raise
    running.set_started(True)
    watch.check_now()
    watch.start()
    log.info("ready", service=service)
