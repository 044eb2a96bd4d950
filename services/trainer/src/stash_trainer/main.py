"""Entry point: load settings, register the TrainerService, serve gRPC until SIGTERM."""

from __future__ import annotations

from collections.abc import Sequence

import grpc

from stash.rm.v1 import trainer_pb2, trainer_pb2_grpc
from stash_common.logs import configure_logging
from stash_common.server import serve
from stash_common.settings import load
from stash_trainer.settings import TrainerSettings


def register(server: grpc.Server) -> Sequence[str]:
    """Add the trainer API to `server`; RPCs whose issue has not landed answer UNIMPLEMENTED."""
    trainer_pb2_grpc.add_TrainerServiceServicer_to_server(trainer_pb2_grpc.TrainerServiceServicer(), server)
    return [trainer_pb2.DESCRIPTOR.services_by_name["TrainerService"].full_name]


def main() -> None:
    """Run the trainer service until SIGTERM or SIGINT."""
    settings = load(TrainerSettings)
    configure_logging("trainer", settings.log_level)
    serve("trainer", register, settings.host, settings.port)
