"""Entry point: load settings, build the scorer, serve gRPC until SIGTERM.

The server listens at once but reports NOT_SERVING until the scorer's tables are migrated and its
dispatcher runs, so a health check never calls a scorer that cannot serve. The service opens the
object store only for its jobs' files; its workers download them and the checkpoint from the same
settings.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import grpc

from stash.rm.v1 import ingest_pb2_grpc, scorer_pb2, scorer_pb2_grpc, trainer_pb2_grpc
from stash_common.channels import peer_channel
from stash_common.coordination import make_wakeups
from stash_common.db import make_engine, make_sessions, upgrade
from stash_common.jobs.launchers import make_launcher
from stash_common.jobs.local import shared_cpus_env
from stash_common.logs import configure_logging
from stash_common.server import serve
from stash_common.settings import load
from stash_common.worker_storage import WorkerStorageSettings
from stash_scorer.api import ScorerServicer
from stash_scorer.background import BackgroundScoring
from stash_scorer.clients import IngestClient, TrainerClient
from stash_scorer.dispatcher import Dispatcher, JobSettings
from stash_scorer.releases import Releases
from stash_scorer.runs import Scoring
from stash_scorer.settings import ScorerSettings
from stash_scorer.store import MIGRATIONS_DIR


def job_settings(settings: ScorerSettings) -> JobSettings:
    """The batching and scoring-job settings of this scorer; its workers report to STASH_SCORER_ADDRESS."""
    return JobSettings(
        scorer_address=settings.address_of("scorer"),
        max_active_batches=settings.max_active_batches,
        batch_traces=settings.batch_traces,
        max_attempts=settings.max_attempts,
        max_length=settings.max_length,
        batch_size=settings.batch_size,
        job_timeout=timedelta(seconds=settings.job_timeout_s),
        sweep_interval_s=settings.sweep_interval_s,
    )


def main() -> None:
    """Run the scorer service until SIGTERM or SIGINT."""
    settings = load(ScorerSettings)
    configure_logging("scorer", settings.log_level)
    engine = make_engine(settings.database_url)
    sessions = make_sessions(engine)
    traces = IngestClient(ingest_pb2_grpc.IngestServiceStub(peer_channel(settings, "ingest")))
    models = TrainerClient(trainer_pb2_grpc.TrainerServiceStub(peer_channel(settings, "trainer")))
    background = BackgroundScoring(sessions, traces, settings.debounce_s)
    # Local workers share this machine's cores: each gets its share of threads (Kubernetes Jobs get their own).
    launcher = make_launcher(settings.launcher, settings.artifact_dir, shared_cpus_env(settings.max_active_batches))
    objects = load(WorkerStorageSettings).object_store()  # where job files go: the workers' own settings
    wakeups = make_wakeups(settings.redis_url)
    dispatcher = Dispatcher(sessions, traces, objects, launcher, wakeups, job_settings(settings), background)
    scoring = Scoring(sessions, traces, models, dispatcher.wake, objects)
    servicer = ScorerServicer(sessions, scoring, Releases(sessions, objects, dispatcher.wake))

    def register(server: grpc.Server) -> Sequence[str]:
        scorer_pb2_grpc.add_ScorerServiceServicer_to_server(servicer, server)
        return [scorer_pb2.DESCRIPTOR.services_by_name["ScorerService"].full_name]

    def prepare() -> None:
        upgrade("scorer", MIGRATIONS_DIR, settings.database_url)
        dispatcher.start()

    serve(settings, settings.port, register, engine, on_stop=dispatcher.stop, prepare=prepare)
