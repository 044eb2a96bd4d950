"""Entry point: load settings, register the LabelerService, serve gRPC until SIGTERM."""

from __future__ import annotations

from collections.abc import Sequence

import grpc

from stash.rm.v1 import labeler_pb2, labeler_pb2_grpc
from stash_common.logs import configure_logging
from stash_common.server import serve
from stash_common.settings import load
from stash_labeler.settings import LabelerSettings


def register(server: grpc.Server) -> Sequence[str]:
    """Add the labeler API to `server`; RPCs whose issue has not landed answer UNIMPLEMENTED."""
    labeler_pb2_grpc.add_LabelerServiceServicer_to_server(labeler_pb2_grpc.LabelerServiceServicer(), server)
    return [labeler_pb2.DESCRIPTOR.services_by_name["LabelerService"].full_name]


def main() -> None:
    """Run the labeler service until SIGTERM or SIGINT."""
    settings = load(LabelerSettings)
    configure_logging("labeler", settings.log_level)
    serve("labeler", register, settings.host, settings.port)
