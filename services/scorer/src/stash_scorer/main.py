"""Entry point: load settings, register the ScorerService, serve gRPC until SIGTERM."""

from __future__ import annotations

from collections.abc import Sequence

import grpc

from stash.rm.v1 import scorer_pb2, scorer_pb2_grpc
from stash_common.logs import configure_logging
from stash_common.server import serve
from stash_common.settings import load
from stash_scorer.api import ScorerServicer
from stash_scorer.settings import ScorerSettings


def register(server: grpc.Server) -> Sequence[str]:
    """Add the scorer API to `server` (its RPCs answer UNIMPLEMENTED until their issue lands)."""
    scorer_pb2_grpc.add_ScorerServiceServicer_to_server(ScorerServicer(), server)
    return [scorer_pb2.DESCRIPTOR.services_by_name["ScorerService"].full_name]


def main() -> None:
    """Run the scorer service until SIGTERM or SIGINT."""
    settings = load(ScorerSettings)
    configure_logging("scorer", settings.log_level)
    serve("scorer", register, settings.host, settings.port)
