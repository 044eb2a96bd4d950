"""Entry point: load settings, register the IngestService, serve gRPC until SIGTERM."""

from __future__ import annotations

from collections.abc import Sequence

import grpc

from stash.rm.v1 import ingest_pb2, ingest_pb2_grpc
from stash_common.logs import configure_logging
from stash_common.server import serve
from stash_common.settings import load
from stash_ingest.settings import IngestSettings


def register(server: grpc.Server) -> Sequence[str]:
    """Add the ingest API to `server`; RPCs whose issue has not landed answer UNIMPLEMENTED."""
    ingest_pb2_grpc.add_IngestServiceServicer_to_server(ingest_pb2_grpc.IngestServiceServicer(), server)
    return [ingest_pb2.DESCRIPTOR.services_by_name["IngestService"].full_name]


def main() -> None:
    """Run the ingest service until SIGTERM or SIGINT."""
    settings = load(IngestSettings)
    configure_logging("ingest", settings.log_level)
    serve("ingest", register, settings.host, settings.port)
