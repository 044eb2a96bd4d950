"""The gateway's FastAPI application: routes, authentication, errors, metrics."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import grpc
import structlog
from fastapi import Depends, FastAPI
from fastapi.exceptions import RequestValidationError
from sqlalchemy.exc import SQLAlchemyError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.gzip import GZipMiddleware

from stash_common.db import make_engine, make_sessions
from stash_common.errors import StashError
from stash_common.outages import DATABASE, REDIS
from stash_common.readiness import database_check, redis_check
from stash_common.server import start
from stash_common.storage import LocalObjectStore, load_signing_key
from stash_gateway import otlp, web
from stash_gateway.metrics import HttpMetrics
from stash_gateway.openapi import (
    document_errors,
    method_not_allowed_response,
    refuse_nul_in_url,
    validation_error_response,
)
from stash_gateway.otlp import register_trace_service
from stash_gateway.peers import Peers
from stash_gateway.query.engine import QueryEngine
from stash_gateway.rate_limits import RateLimits, make_buckets, make_slots
from stash_gateway.routes import (
    account,
    admin,
    artifacts,
    evaluator,
    evaluator_admin,
    exports,
    gepa_runs,
    health,
    query,
    reviewers,
    reward_models,
    sections,
    sources,
    traces,
    trajectories,
    transcripts,
)

# Renamed: `annotations` is already the name of the `__future__` feature imported above.
from stash_gateway.routes import annotations as annotation_routes
from stash_gateway.settings import GatewaySettings
from stash_gateway.status import rpc_error_response, stash_error_response, unexpected_error_response

log = structlog.get_logger(__name__)


def create_app(settings: GatewaySettings) -> FastAPI:
    """The REST API, wired to the gateway's database and to the services over gRPC."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine = make_engine(settings.database_url)
        app.state.sessions = make_sessions(engine)
        app.state.store_checks = {DATABASE: database_check(engine)}
        if settings.redis_url:
            app.state.store_checks[REDIS] = redis_check(settings.redis_url)
        app.state.peers = Peers(settings)
        app.state.query_engine = QueryEngine(app.state.peers, settings, app.state.metrics.registry)
        app.state.admin_key = admin.admin_credential(settings)
        if app.state.admin_key is None:
            log.warning("admin routes disabled", reason="STASH_GATEWAY_ADMIN_KEY is not set")
        otlp_grpc = start(
            register_trace_service(app.state),
            settings.host,
            settings.otlp_grpc_port,
            port_variable="STASH_GATEWAY_OTLP_GRPC_PORT",
            stack_id=settings.stack_id,
        )
        app.state.otlp_grpc_port = otlp_grpc.port
        log.info("otlp grpc receiver", port=otlp_grpc.port)
        yield
        otlp_grpc.stop(grace_s=settings.shutdown_grace_s)
        app.state.query_engine.close()
        app.state.peers.close()
        engine.dispose()

    app = FastAPI(
        title="Stash RM",
        version="0.1.0",
        lifespan=lifespan,
        docs_url="/docs",
        dependencies=[Depends(refuse_nul_in_url)],
    )
    app.state.settings = settings
    app.state.metrics = HttpMetrics()
    app.state.rate_limits = RateLimits(settings, make_buckets(settings))
    app.state.import_slots = make_slots(settings)
    # Gzip for clients that accept it, innermost (added first) so it sees whole bodies and skips small ones;
    # answers already encoded, gRPC and event streams are left alone.
    app.add_middleware(GZipMiddleware, minimum_size=1024, compresslevel=6)
    app.middleware("http")(app.state.metrics.middleware)
    app.add_exception_handler(StashError, stash_error_response)
    app.add_exception_handler(grpc.RpcError, rpc_error_response)
    # The database's own errors (an outage is 503), then anything else (a JSON 500), none with the exception's text.
    for unexpected in (SQLAlchemyError, Exception):
        app.add_exception_handler(unexpected, unexpected_error_response)
    app.add_exception_handler(RequestValidationError, validation_error_response)
    app.add_exception_handler(StarletteHTTPException, method_not_allowed_response)
    document_errors(app)
    app.include_router(health.router)
    app.include_router(query.router)
    routes = (
        account,
        admin,
        traces,
        sections,
        annotation_routes,
        exports,
        sources,
        reviewers,
        trajectories,
        reward_models,
        gepa_runs,
        transcripts,
        evaluator,
        evaluator_admin,
    )
    for module in (*routes, otlp):
        app.include_router(module.router)
    web.install(app)
    if settings.s3_bucket is None:
        # S3 presigns its own URLs; only local artifacts need the gateway to serve them.
        signing_key = load_signing_key(settings.data_dir, settings.signing_key)
        app.state.artifacts = LocalObjectStore(settings.data_dir / "artifacts", settings.base_url, signing_key)
        app.include_router(artifacts.router)
    return app
