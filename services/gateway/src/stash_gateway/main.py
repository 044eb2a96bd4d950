"""Entry point: load settings, take the gateway's ports, migrate its tables, serve the REST API with uvicorn.

The ports are taken before anything else, so a port in use stops the start at once with a message naming
what holds it (`stash_common.listeners`); uvicorn is handed the bound socket instead of binding its own.
"""

from __future__ import annotations

import uvicorn

from stash_common.db import upgrade
from stash_common.instance import hold
from stash_common.listeners import bound_socket, check_free
from stash_common.logs import configure_logging
from stash_common.settings import load
from stash_gateway.access_log import redact_access_log
from stash_gateway.app import create_app
from stash_gateway.settings import GatewaySettings
from stash_gateway.store import MIGRATIONS_DIR


def main() -> None:
    """Run the gateway until SIGTERM or SIGINT (uvicorn drains open requests first)."""
    settings = load(GatewaySettings)
    configure_logging("gateway", settings.log_level)
    redact_access_log()
    if settings.profile == "embedded":
        hold(settings.data_dir, "gateway", settings.stack_id)
    listener = bound_socket(settings.host, settings.port, "STASH_GATEWAY_PORT")
    check_free(settings.host, settings.otlp_grpc_port, "STASH_GATEWAY_OTLP_GRPC_PORT")
    upgrade("gateway", MIGRATIONS_DIR, settings.database_url)
    config = uvicorn.Config(
        create_app(settings),
        host=settings.host,  # what its start-up message names; it listens on `listener`
        port=settings.port,
        http="httptools",  # its C parser reads a 44 MB body in half h11's time
        log_config=None,
        timeout_keep_alive=settings.keep_alive_s,
        timeout_graceful_shutdown=settings.shutdown_grace_s,
    )
    uvicorn.Server(config).run(sockets=[listener])
