"""Entry point: load settings, migrate the trainer's tables, start the dispatcher, serve gRPC until SIGTERM."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import grpc

from stash.rm.v1 import (
    evaluator_pb2,
    evaluator_pb2_grpc,
    ingest_pb2_grpc,
    labeler_pb2_grpc,
    scorer_pb2_grpc,
    trainer_pb2,
    trainer_pb2_grpc,
)
from stash_common.channels import peer_channel
from stash_common.coordination import make_wakeups
from stash_common.db import make_engine, make_sessions, upgrade
from stash_common.jobs.launchers import make_launcher
from stash_common.logs import configure_logging
from stash_common.server import serve
from stash_common.settings import load
from stash_common.storage import make_object_store
from stash_trainer.api import TrainerServicer
from stash_trainer.clients import ScoreClient, TraceClient
from stash_trainer.dispatcher import Dispatcher, JobSettings
from stash_trainer.evaluator.publishing import ReleaseLoop
from stash_trainer.evaluator_api import CandidateTraining, EvaluatorServicer
from stash_trainer.pairs.feedback import make_extractor
from stash_trainer.settings import TrainerSettings
from stash_trainer.store import MIGRATIONS_DIR


def job_settings(settings: TrainerSettings) -> JobSettings:
    """The training-job settings of this trainer; its workers report to STASH_TRAINER_ADDRESS."""
    return JobSettings(
        report_address=settings.address_of("trainer"),
        max_length=settings.max_length,
        batch_size=settings.batch_size,
        learning_rate=settings.learning_rate,
        submit_timeout=timedelta(seconds=settings.submit_timeout_s),
        job_timeout=timedelta(seconds=settings.job_timeout_s),
        sweep_interval_s=settings.sweep_interval_s,
        device=settings.device,
    )


def main() -> None:
    """Run the trainer service until SIGTERM or SIGINT."""
    settings = load(TrainerSettings)
    configure_logging("trainer", settings.log_level)
    engine = make_engine(settings.database_url)
    sessions = make_sessions(engine)
    traces = TraceClient(
        ingest_pb2_grpc.IngestServiceStub(peer_channel(settings, "ingest")),
        labeler_pb2_grpc.LabelerServiceStub(peer_channel(settings, "labeler")),
    )
    scores = ScoreClient(scorer_pb2_grpc.ScorerServiceStub(peer_channel(settings, "scorer")))
    objects = make_object_store(
        settings.data_dir,
        settings.s3_bucket,
        settings.s3_endpoint_url,
        settings.s3_region,
        settings.download_base_url,
        settings.signing_key,
    )
    wakeups = make_wakeups(settings.redis_url)

    def start_scheduled() -> object:
        return evaluator.start_scheduled()

    release_loop = ReleaseLoop(sessions, scores, wakeups, start_scheduled, settings.sweep_interval_s)
    dispatcher = Dispatcher(
        sessions,
        traces,
        scores,
        objects,
        make_launcher(settings.launcher, settings.artifact_dir),
        wakeups,
        job_settings(settings),
        make_extractor(settings),
        candidate_settled=release_loop.wake,
    )
    servicer = TrainerServicer(sessions, traces, scores, objects, dispatcher, settings.base_model, settings.launcher)
    training = CandidateTraining(dispatcher, settings.base_model, settings.launcher, release_loop.wake)
    evaluator = EvaluatorServicer(sessions, traces, objects, training)

    def register(server: grpc.Server) -> Sequence[str]:
        trainer_pb2_grpc.add_TrainerServiceServicer_to_server(servicer, server)
        evaluator_pb2_grpc.add_EvaluatorServiceServicer_to_server(evaluator, server)
        return [
            trainer_pb2.DESCRIPTOR.services_by_name["TrainerService"].full_name,
            evaluator_pb2.DESCRIPTOR.services_by_name["EvaluatorService"].full_name,
        ]

    def prepare() -> None:
        upgrade("trainer", MIGRATIONS_DIR, settings.database_url)
        dispatcher.start()
        release_loop.start()

    def stop() -> None:
        release_loop.stop()
        dispatcher.stop()

    serve(settings, settings.port, register, engine, on_stop=stop, prepare=prepare)
