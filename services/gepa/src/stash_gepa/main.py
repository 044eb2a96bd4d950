"""Entry point: load settings, build the gepa service, serve gRPC until SIGTERM.

The server listens at once but reports NOT_SERVING until its tables are migrated and its dispatcher
runs. The service never opens the object store: its workers download the checkpoint themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import grpc

from stash.rm.v1 import gepa_pb2, gepa_pb2_grpc, ingest_pb2_grpc, trainer_pb2_grpc
from stash_common.channels import peer_channel
from stash_common.coordination import make_wakeups
from stash_common.db import make_engine, make_sessions, upgrade
from stash_common.jobs.launchers import make_launcher
from stash_common.logs import configure_logging
from stash_common.server import serve
from stash_common.settings import load
from stash_common.worker_storage import WorkerStorageSettings
from stash_gepa.api import GepaServicer, default_models
from stash_gepa.clients import TraceClient, TrainerClient
from stash_gepa.dispatcher import Dispatcher, JobSettings
from stash_gepa.settings import GepaSettings
from stash_gepa.store import MIGRATIONS_DIR


def job_settings(settings: GepaSettings) -> JobSettings:
    """The GEPA-job settings of this service; its workers report to STASH_GEPA_ADDRESS."""
    return JobSettings(
        report_address=settings.address_of("gepa"),
        reflection_api_base=settings.reflection_api_base,
        reflection_minibatch_size=settings.reflection_minibatch_size,
        task_concurrency=settings.task_concurrency,
        max_length=settings.max_length,
        batch_size=settings.batch_size,
        submit_timeout=timedelta(seconds=settings.submit_timeout_s),
        job_timeout=timedelta(seconds=settings.job_timeout_s),
        sweep_interval_s=settings.sweep_interval_s,
    )


def main() -> None:
    """Run the gepa service until SIGTERM or SIGINT."""
    settings = load(GepaSettings)
    configure_logging("gepa", settings.log_level)
    engine = make_engine(settings.database_url)
    sessions = make_sessions(engine)
    models = TrainerClient(trainer_pb2_grpc.TrainerServiceStub(peer_channel(settings, "trainer")))
    traces = TraceClient(ingest_pb2_grpc.IngestServiceStub(peer_channel(settings, "ingest")))
    launcher = make_launcher(settings.launcher, settings.artifact_dir)
    objects = load(WorkerStorageSettings).object_store()  # where job files go: the workers' own settings
    dispatcher = Dispatcher(
        sessions, models, traces, objects, launcher, make_wakeups(settings.redis_url), job_settings(settings)
    )
    defaults = default_models(bool(settings.anthropic_api_key), settings.reflection_api_base)
    servicer = GepaServicer(sessions, models, dispatcher, defaults)

    def register(server: grpc.Server) -> Sequence[str]:
        gepa_pb2_grpc.add_GepaServiceServicer_to_server(servicer, server)
        return [gepa_pb2.DESCRIPTOR.services_by_name["GepaService"].full_name]

    def prepare() -> None:
        upgrade("gepa", MIGRATIONS_DIR, settings.database_url)
        dispatcher.start()

    serve(settings, settings.port, register, engine, on_stop=dispatcher.stop, prepare=prepare)
