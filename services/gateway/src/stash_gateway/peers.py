"""gRPC channels from the gateway to the five services behind it, and reads that tolerate a peer's outage.

A view that merges several services' data (a trace with its evaluation and its learned scores)
must not fail because one of them is out of reach: such reads go through `tolerating_outage`,
bounded by a short deadline from GatewaySettings, and the view shows that part as absent.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import grpc
import structlog
from google.protobuf.message import Message

from stash.rm.v1 import (
    evaluator_pb2_grpc,
    gepa_pb2_grpc,
    ingest_pb2_grpc,
    labeler_pb2_grpc,
    scorer_pb2_grpc,
    trainer_pb2_grpc,
)
from stash_common.channels import READINESS_NAMES, check_health, open_channel
from stash_common.settings import ServiceSettings

log = structlog.get_logger()
PEER_NAMES: tuple[str, ...] = ("ingest", "labeler", "trainer", "scorer", "gepa")
_OUT_OF_REACH = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
RequestT = TypeVar("RequestT", bound=Message)
ResponseT = TypeVar("ResponseT", bound=Message)


def tolerating_outage(
    peer: str, call: grpc.UnaryUnaryMultiCallable[RequestT, ResponseT], request: RequestT, timeout_s: float
) -> ResponseT | None:
    """The peer's answer, or None when it is out of reach (unavailable or past `timeout_s`); other errors raise."""
    try:
        return call(request, timeout=timeout_s)
    except grpc.RpcError as error:
        if error.code() not in _OUT_OF_REACH:
            raise
        log.warning("peer out of reach; answering without its part of the view", peer=peer, code=error.code().name)
        return None


class Peers:
    """One long-lived channel per service; stubs are made on them by the routes."""

    def __init__(self, settings: ServiceSettings) -> None:
        self.channels: dict[str, grpc.Channel] = {name: open_channel(settings.address_of(name)) for name in PEER_NAMES}
        self.stack_id = settings.stack_id

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

    @property
    def evaluator(self) -> evaluator_pb2_grpc.EvaluatorServiceStub:
        """A stub for the shared evaluator's data, which the trainer serves."""
        return evaluator_pb2_grpc.EvaluatorServiceStub(self.channels["trainer"])

    @property
    def scorer(self) -> scorer_pb2_grpc.ScorerServiceStub:
        """A stub for the scorer service."""
        return scorer_pb2_grpc.ScorerServiceStub(self.channels["scorer"])

    @property
    def gepa(self) -> gepa_pb2_grpc.GepaServiceStub:
        """A stub for the gepa service."""
        return gepa_pb2_grpc.GepaServiceStub(self.channels["gepa"])

    def readiness(self, timeout_s: float) -> dict[str, str]:
        """Every service's readiness (SERVING while it and its database answer; ANOTHER_STACK for a service
        of another stack than the gateway's), checked concurrently."""

        def check(name: str) -> str:
            return check_health(self.channels[name], READINESS_NAMES[name], timeout_s, self.stack_id)

        with ThreadPoolExecutor(max_workers=len(self.channels)) as pool:
            return dict(zip(self.channels, pool.map(check, self.channels), strict=True))

    def close(self) -> None:
        """Close every channel."""
        for channel in self.channels.values():
            channel.close()
