"""Helpers for labeler tests: a real LabelerServicer and worker on a real gRPC port, and labelers that count."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc

from stash.rm.v1 import ingest_pb2_grpc, labeler_pb2, labeler_pb2_grpc
from stash_common.channels import open_channel
from stash_common.coordination import InProcessWakeups
from stash_common.db import make_engine, make_sessions, upgrade
from stash_common.server import start
from stash_labeler.api import LabelerServicer
from stash_labeler.assessments import FastModel
from stash_labeler.chunks import Chunk
from stash_labeler.clients import IngestClient
from stash_labeler.evaluation_worker import EvaluationWorker, WorkerConfig
from stash_labeler.label_schema import LabelSource, StepLabel
from stash_labeler.labeling.protocol import Labeler
from stash_labeler.labeling.rule_labeler import label_chunks
from stash_labeler.scoring.grading import Grader
from stash_labeler.store import MIGRATIONS_DIR
from stash_labeler.traces import LabelerTrace

QUICK_SWEEPS = WorkerConfig(sweep_interval_s=0.5)


@dataclass
class CountingLabeler:
    """Labels like the rule-based labeler but records itself as a model and counts the chunks sent to it."""

    source: LabelSource = LabelSource.LLM
    model: str = "counting-model"
    calls: list[list[str]] = field(default_factory=list)

    def label(
        self, trace: LabelerTrace, chunks: Sequence[Chunk], targets: Sequence[str], known: Mapping[str, StepLabel]
    ) -> dict[str, StepLabel]:
        self.calls.append(list(targets))
        return {label.chunk_id: label for label in label_chunks(chunks) if label.chunk_id in targets}

    @property
    def labeled(self) -> int:
        """How many chunks were sent for labeling in all."""
        return sum(len(call) for call in self.calls)


@dataclass
class RunningLabeler:
    """A labeler server, its worker, and a stub on it."""

    stub: Any
    worker: EvaluationWorker
    sessions: Any
    stop: Any


def serve_labeler(
    database_url: str,
    ingest: ingest_pb2_grpc.IngestServiceStub,
    labeler: Labeler,
    grader: Grader | None = None,
    start_worker: bool = True,
    config: WorkerConfig = QUICK_SWEEPS,
    port: int = 0,
    fast_model: FastModel | None = None,
) -> RunningLabeler:
    """A started labeler server whose worker reads traces from `ingest`."""
    upgrade("labeler", MIGRATIONS_DIR, database_url)
    engine = make_engine(database_url)
    sessions = make_sessions(engine)
    traces = IngestClient(ingest)
    worker = EvaluationWorker(sessions, traces, labeler, InProcessWakeups(), config, grader=grader)
    servicer = LabelerServicer(sessions, traces, worker, fast_model=fast_model)

    def register(server: grpc.Server) -> list[str]:
        labeler_pb2_grpc.add_LabelerServiceServicer_to_server(servicer, server)
        return [labeler_pb2.DESCRIPTOR.services_by_name["LabelerService"].full_name]

    running = start(register, "127.0.0.1", port)
    channel = open_channel(f"127.0.0.1:{running.port}")
    if start_worker:
        worker.start()

    def stop() -> None:
        worker.stop()
        channel.close()
        running.stop(0)
        engine.dispose()

    return RunningLabeler(labeler_pb2_grpc.LabelerServiceStub(channel), worker, sessions, stop)
