"""gRPC channels from the gateway to the five services behind it."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import grpc

from stash.rm.v1 import ingest_pb2_grpc, labeler_pb2_grpc, trainer_pb2_grpc
from stash_common.channels import check_health, open_channel
from stash_common.settings import ServiceSettings

PEER_NAMES: tuple[str, ...] = ("ingest", "labeler", "trainer", "scorer", "gepa")


class Peers:
    """One long-lived channel per service; stubs are made on them by the routes."""

    def __init__(self, settings: ServiceSettings) -> None:
        self.channels: dict[str, grpc.Channel] = {name: open_channel(settings.address_of(name)) for name in PEER_NAMES}

    @property
    def ingest(self) -> ingest_pb2_grpc.IngestServiceStub:
        """A stub for the ingest service."""
        return ingest_pb2_grpc.IngestServiceStub(self.channels["ingest"])

    @property
    def labeler(self) -> labeler_pb2_grpc.LabelerServiceStub:
        """A stub for the labeler service."""
        return labeler_pb2_grpc.LabelerServiceStub(self.channels["labeler"])

    @property
    def trainer(self) -> trainer_pb2_grpc.TrainerServiceStub:
        """A stub for the trainer service."""
        return trainer_pb2_grpc.TrainerServiceStub(self.channels["trainer"])

    def health(self, timeout_s: float) -> dict[str, str]:
        """Every service's health status name, checked concurrently."""
        with ThreadPoolExecutor(max_workers=len(self.channels)) as pool:
            statuses = pool.map(lambda channel: check_health(channel, timeout_s=timeout_s), self.channels.values())
            return dict(zip(self.channels, statuses, strict=True))

    def close(self) -> None:
        """Close every channel."""
        for channel in self.channels.values():
            channel.close()
