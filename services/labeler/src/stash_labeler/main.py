"""Entry point: load settings, migrate the labeler's tables, start the worker, serve gRPC until SIGTERM.

The labelers, the grader and the PRM's classifier are chosen here from the settings; the OpenAI
library is imported only when one of them needs it, so a rule-only labeler never loads it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import grpc
import structlog
from sqlalchemy.orm import Session, sessionmaker

from stash.rm.v1 import ingest_pb2_grpc, labeler_pb2, labeler_pb2_grpc
from stash_common.channels import peer_channel
from stash_common.coordination import Wakeups, make_wakeups
from stash_common.db import make_engine, make_sessions, upgrade
from stash_common.errors import ConfigError
from stash_common.logs import configure_logging
from stash_common.server import freeze_start_up, serve
from stash_common.settings import load
from stash_labeler.api import LabelerServicer
from stash_labeler.assessments import AnthropicFastModel, FastModel
from stash_labeler.clients import IngestClient
from stash_labeler.evaluation_processes import EvaluationProcesses
from stash_labeler.evaluation_worker import EvaluationWorker, WorkerConfig
from stash_labeler.labeling.protocol import Labeler
from stash_labeler.labeling.rule_labeler import RuleLabeler
from stash_labeler.prm import LLMTrajectoryClassifier, ProcessModel
from stash_labeler.scoring.grading import Grader, OpenAIGrader
from stash_labeler.settings import LabelerSettings
from stash_labeler.store import MIGRATIONS_DIR

log = structlog.get_logger()


def make_labeler(settings: LabelerSettings) -> Labeler:
    """The LLM labeler when an OpenAI key is configured; the rule-based labeler otherwise."""
    if not settings.openai_api_key:
        return RuleLabeler()
    import openai

    from stash_labeler.labeling.llm import OpenAILabeler

    client = openai.OpenAI(api_key=settings.openai_api_key, base_url=settings.openai_base_url)
    return OpenAILabeler(
        client,
        settings.step_label_model,
        max_chunks=settings.step_labeling_max_chunks,
        max_chars=settings.step_labeling_max_chars,
    )


def make_grader(settings: LabelerSettings) -> Grader | None:
    """The grading model's quality checks when a grading model is configured."""
    if not settings.grading_model:
        return None
    import openai

    client = openai.OpenAI(api_key=settings.grading_api_key or "unset", base_url=settings.grading_base_url)
    return OpenAIGrader(client, settings.grading_model)


def make_process_model(settings: LabelerSettings) -> ProcessModel:
    """The trajectory PRM: the rule detectors, plus the LLM classifier for strategy `rules+ml`."""
    config = settings.prm_config
    if config.strategy == "rules":
        return ProcessModel(config)
    if not settings.openai_api_key:
        raise ConfigError('STASH_OPENAI_API_KEY is not set (needed by STASH_PRM_CONFIG strategy "rules+ml")')
    import openai

    # A synchronous client, called on a worker thread: the process model runs each classification in its own
    # `asyncio.run`, and an async client is bound to the first event loop it ran on (every later call failed,
    # and the classifier, which never raises, silently fell back to the rules).
    client = openai.OpenAI(api_key=settings.openai_api_key, base_url=settings.openai_base_url)
    model = settings.prm_model or settings.step_label_model

    def ask(prompt: str) -> str:
        response = client.chat.completions.create(model=model, messages=[{"role": "user", "content": prompt}])
        return response.choices[0].message.content or ""

    async def complete(prompt: str) -> str:
        return await asyncio.to_thread(ask, prompt)

    return ProcessModel(config, LLMTrajectoryClassifier.from_config(complete, config))


def make_fast_model(settings: LabelerSettings) -> FastModel | None:
    """The fast Anthropic model for section summaries and completion, when a key is configured."""
    if not settings.anthropic_api_key:
        return None
    return AnthropicFastModel(settings.anthropic_api_key, settings.fast_model, settings.anthropic_base_url)


def make_worker(settings: LabelerSettings, sessions: sessionmaker[Session], wakeups: Wakeups) -> EvaluationWorker:
    """An evaluation worker reading ingest on a channel of its own."""
    ingest = IngestClient(ingest_pb2_grpc.IngestServiceStub(peer_channel(settings, "ingest")))
    return EvaluationWorker(
        sessions,
        ingest,
        make_labeler(settings),
        wakeups,
        WorkerConfig(sweep_interval_s=settings.sweep_interval_s, lease_s=settings.lease_s),
        grader=make_grader(settings),
        process_model=make_process_model(settings),
    )


def main() -> None:
    """Run the labeler service until SIGTERM or SIGINT."""
    settings = load(LabelerSettings)
    configure_logging("labeler", settings.log_level)
    processes = EvaluationProcesses()
    # First, before any thread, channel or connection exists: a forked process makes its own.
    processes.fork(
        settings.evaluation_processes - 1,
        lambda wakeups: make_worker(settings, make_sessions(make_engine(settings.database_url)), wakeups),
    )
    engine = make_engine(settings.database_url)
    sessions = make_sessions(engine)
    wakeups = make_wakeups(settings.redis_url)
    worker = make_worker(settings, sessions, wakeups)
    servicer = LabelerServicer(sessions, worker.traces, worker, fast_model=make_fast_model(settings))
    log.info(
        "labeler configured",
        labeler=worker.labeler.source.value,
        grading=bool(settings.grading_model),
        evaluation_processes=settings.evaluation_processes,
    )

    def register(server: grpc.Server) -> Sequence[str]:
        labeler_pb2_grpc.add_LabelerServiceServicer_to_server(servicer, server)
        return [labeler_pb2.DESCRIPTOR.services_by_name["LabelerService"].full_name]

    def prepare() -> None:
        upgrade("labeler", MIGRATIONS_DIR, settings.database_url)
        freeze_start_up()  # a worker-like run of 100k steps spent 1.5 s of 4 s in full collections, 0.3 s after
        worker.start()
        processes.start(wakeups)

    def stop() -> None:
        worker.stop()
        processes.stop()

    serve(settings, settings.port, register, engine, on_stop=stop, prepare=prepare)
