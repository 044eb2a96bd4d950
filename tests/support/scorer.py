"""Helpers for scorer tests: a real ScorerServicer and dispatcher on a real gRPC port, a real trainer to ask
about models, and waiting for runs to finish.

The dispatcher launches `support.scoring_worker` (fixed scores over real gRPC) through the real
`LocalSubprocessLauncher`, so everything but inference is the service as it runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import grpc

from stash.rm.v1 import common_pb2, scorer_pb2, scorer_pb2_grpc, trainer_pb2, trainer_pb2_grpc
from stash_common.channels import open_channel
from stash_common.coordination import InProcessWakeups, Wakeups
from stash_common.db import make_engine, make_sessions, transaction, upgrade
from stash_common.jobs.launch import Launcher
from stash_common.jobs.local import LocalSubprocessLauncher
from stash_common.server import start
from stash_common.storage import LocalObjectStore
from stash_common.training_metrics import TRAINING_METRIC_KEYS
from stash_scorer.api import ScorerServicer
from stash_scorer.background import BackgroundScoring
from stash_scorer.clients import IngestClient, TrainerClient
from stash_scorer.dispatcher import Dispatcher, JobSettings
from stash_scorer.releases import Releases
from stash_scorer.runs import Scoring
from stash_scorer.store import MIGRATIONS_DIR
from stash_trainer import store as trainer_store
from stash_trainer.api import TrainerServicer
from support.processes import free_port

FAKE_WORKER = "support.scoring_worker"
FINISHED = (common_pb2.JOB_STATUS_SUCCEEDED, common_pb2.JOB_STATUS_FAILED)


@dataclass
class RunningTrainer:
    """A trainer server (only its model reads are used) and a session factory on its tables."""

    stub: Any
    sessions: Any
    stop: Callable[[], None]

    def add_model(
        self, owner_id: str, name: str = "refunds", action_scoring_version: int | None = 1, **row: Any
    ) -> str:
        """A reward model of `owner_id` in the trainer's tables, succeeded unless `row` says otherwise."""
        metrics = {**dict.fromkeys(TRAINING_METRIC_KEYS), "action_scoring_version": action_scoring_version}
        model = trainer_store.RewardModelRow(
            owner_id=owner_id,
            name=name,
            base_model="base",
            compute="local",
            epochs=1,
            max_pairs=4000,
            training_config={},
            trace_ids=[],
            progress={},
            status=row.pop("status", "succeeded"),
            metrics=metrics,
            **row,
        )
        with transaction(self.sessions) as session:
            session.add(model)
            session.flush()
            model.artifact_key = f"reward-models/{owner_id}/{model.id}.tar.gz"
        return model.id


def serve_trainer(database_url: str) -> RunningTrainer:
    """A started trainer server on `database_url`; only GetRewardModel is asked of it."""
    upgrade("trainer", trainer_store.MIGRATIONS_DIR, database_url)
    engine = make_engine(database_url)
    sessions = make_sessions(engine)
    servicer = TrainerServicer(sessions, None, None, None, None, "base", "local")

    def register(server: grpc.Server) -> list[str]:
        trainer_pb2_grpc.add_TrainerServiceServicer_to_server(servicer, server)
        return [trainer_pb2.DESCRIPTOR.services_by_name["TrainerService"].full_name]

    running = start(register, "127.0.0.1", 0)
    channel = open_channel(f"127.0.0.1:{running.port}")

    def stop() -> None:
        channel.close()
        running.stop(0)
        engine.dispose()

    return RunningTrainer(trainer_pb2_grpc.TrainerServiceStub(channel), sessions, stop)


@dataclass
class RunningScorer:
    """A scorer server, its dispatcher, and a stub on it."""

    stub: Any
    dispatcher: Dispatcher
    background: BackgroundScoring
    sessions: Any
    objects: LocalObjectStore  # where the dispatcher uploads job files and the fake worker reads them
    stop: Callable[[], None]


def serve_scorer(
    database_url: str,
    ingest: Any,
    trainer: Any,
    artifact_dir: Path,
    start_dispatcher: bool = True,
    wakeups: Wakeups | None = None,
    debounce_s: float = 0.5,
    launcher: Launcher | None = None,
    **job_options: Any,
) -> RunningScorer:
    """A started scorer whose dispatcher launches the fake worker; its job files live under `artifact_dir`.

    `launcher` replaces the fake worker's local launcher; `job_options` override JobSettings.
    """
    upgrade("scorer", MIGRATIONS_DIR, database_url)
    engine = make_engine(database_url)
    sessions = make_sessions(engine)
    traces = IngestClient(ingest)
    port = free_port()
    settings = JobSettings(
        scorer_address=f"127.0.0.1:{port}",
        sweep_interval_s=0.2,
        job_timeout=timedelta(minutes=2),
        **job_options,
    )
    background = BackgroundScoring(sessions, traces, debounce_s)
    # The worker's object store is the one it finds in STASH_DATA_DIR: the same directory as the dispatcher's.
    objects = LocalObjectStore(artifact_dir / "artifacts", "http://127.0.0.1:1", b"k" * 32)
    launcher = launcher or LocalSubprocessLauncher(
        artifact_dir / "logs", {"STASH_DATA_DIR": str(artifact_dir)}, FAKE_WORKER
    )
    dispatcher = Dispatcher(sessions, traces, objects, launcher, wakeups or InProcessWakeups(), settings, background)
    scoring = Scoring(sessions, traces, TrainerClient(trainer), dispatcher.wake, objects)
    servicer = ScorerServicer(sessions, scoring, Releases(sessions, objects, dispatcher.wake))

    def register(server: grpc.Server) -> list[str]:
        scorer_pb2_grpc.add_ScorerServiceServicer_to_server(servicer, server)
        return [scorer_pb2.DESCRIPTOR.services_by_name["ScorerService"].full_name]

    running = start(register, "127.0.0.1", port)
    channel = open_channel(f"127.0.0.1:{port}")
    if start_dispatcher:
        dispatcher.start()

    def stop() -> None:
        dispatcher.stop()
        channel.close()
        running.stop(0)
        engine.dispose()

    stub = scorer_pb2_grpc.ScorerServiceStub(channel)
    return RunningScorer(stub, dispatcher, background, sessions, objects, stop)


@dataclass
class Wired:
    """An ingest stub, a trainer, and a way to start scorers against them."""

    ingest: Any
    trainer: RunningTrainer
    scorer: Callable[..., RunningScorer]


def finished_run(stub: Any, owner_id: str, run_id: str, timeout_s: float = 60.0) -> Any:
    """The scoring run once it has succeeded or failed."""
    deadline = time.monotonic() + timeout_s
    request = scorer_pb2.GetScoringRunRequest(owner_id=owner_id, scoring_run_id=run_id)
    while time.monotonic() < deadline:
        run = stub.GetScoringRun(request, timeout=10).scoring_run
        if run.status in FINISHED:
            return run
        time.sleep(0.05)
    raise TimeoutError(f"scoring run {run_id} did not finish within {timeout_s}s")


def wait_until(condition: Callable[[], Any], timeout_s: float = 60.0, what: str = "the condition") -> Any:
    """Poll `condition` until it returns something truthy; that value."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.05)
    raise TimeoutError(f"{what} did not hold within {timeout_s}s")
