"""Entry point: load settings, migrate the gateway's tables, serve the REST API with uvicorn."""

from __future__ import annotations

import uvicorn

from stash_common.db import upgrade
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
    upgrade("gateway", MIGRATIONS_DIR, settings.database_url)
    uvicorn.run(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_config=None,
        timeout_graceful_shutdown=settings.shutdown_grace_s,
    )
