"""Entry point: load settings, register the GepaService, serve gRPC until SIGTERM."""

from __future__ import annotations

from collections.abc import Sequence

import grpc

from stash.rm.v1 import gepa_pb2, gepa_pb2_grpc
from stash_common.logs import configure_logging
from stash_common.server import serve
from stash_common.settings import load
from stash_gepa.api import GepaServicer
from stash_gepa.settings import GepaSettings

GEPA_SERVICE = gepa_pb2.DESCRIPTOR.services_by_name["GepaService"].full_name


def register(server: grpc.Server) -> Sequence[str]:
    """Add the gepa API to `server` (its RPCs answer UNIMPLEMENTED until their issue lands)."""
    gepa_pb2_grpc.add_GepaServiceServicer_to_server(GepaServicer(), server)
    return [GEPA_SERVICE]


def main() -> None:
    """Run the gepa service until SIGTERM or SIGINT."""
    settings = load(GepaSettings)
    configure_logging("gepa", settings.log_level)
    # The process is up, but GepaService cannot run anything yet: its health says NOT_SERVING (issue 13).
    serve("gepa", register, settings.host, settings.port, not_built=[GEPA_SERVICE])
