"""The services behind the gateway on real ports, for tests of the gateway app itself: ingest announcing to a
rule-based labeler, a trainer for model reads, and a scorer whose jobs run the fake scoring worker."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from stash.rm.v1 import labeler_pb2_grpc
from stash_common.channels import open_channel
from stash_common.db import make_engine, make_sessions, transaction, upgrade
from stash_gateway import store as gateway_store
from stash_ingest.clients import LabelerClient
from stash_ingest.revisions import Announcer
from stash_ingest.titles import derive_title
from stash_labeler.labeling.rule_labeler import RuleLabeler
from support.ingest import serve_ingest
from support.labeler import RunningLabeler, serve_labeler
from support.processes import free_ports
from support.scorer import RunningScorer, RunningTrainer, serve_scorer, serve_trainer

TESTS_DIR = Path(__file__).resolve().parents[1]


@dataclass
class Backend:
    """Stubs and handles of the running services, and the gateway settings that point at them."""

    ingest: Any
    labeler: RunningLabeler
    trainer: RunningTrainer
    scorer: RunningScorer
    database_url: str
    gateway_settings: dict[str, Any]

    def user(self, name: str) -> tuple[str, str]:
        """A new user of the gateway's tables and a full-access key: (user id, key)."""
        sessions = make_sessions(make_engine(self.database_url))
        with transaction(sessions) as session:
            user = gateway_store.create_user(session, name)
            _, key = gateway_store.create_key(session, user.id, "full", read_only=False)
        return user.id, key


@contextmanager
def serve_backend(database_url: str, artifact_dir: Path) -> Iterator[Backend]:
    """Every service the gateway's trace, score and query routes reach, on one database."""
    with pytest.MonkeyPatch.context() as env:
        # The scorer's dispatcher launches `python -m support.scoring_worker`, which lives beside these tests.
        env.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(TESTS_DIR), os.environ.get("PYTHONPATH")])))
        env.delenv("STASH_TEST_SCORING_WORKER", raising=False)
        ingest_port, labeler_port = free_ports(2)
        labeler_stub = labeler_pb2_grpc.LabelerServiceStub(open_channel(f"127.0.0.1:{labeler_port}"))
        announcer = Announcer(LabelerClient(labeler_stub).announce_revisions)
        ingest, stop_ingest = serve_ingest(database_url, derive_title, announcer, port=ingest_port)
        labeler = serve_labeler(database_url, ingest, RuleLabeler(), port=labeler_port)
        trainer = serve_trainer(database_url)
        scorer = serve_scorer(database_url, ingest, trainer.stub, artifact_dir, debounce_s=3600)
        upgrade("gateway", gateway_store.MIGRATIONS_DIR, database_url)
        settings = {
            "database_url": database_url,
            "ingest_address": f"127.0.0.1:{ingest_port}",
            "labeler_address": f"127.0.0.1:{labeler_port}",
            "scorer_address": scorer.dispatcher.settings.scorer_address,
            "otlp_grpc_port": 0,
        }
        try:
            yield Backend(ingest, labeler, trainer, scorer, database_url, settings)
        finally:
            scorer.stop()
            trainer.stop()
            labeler.stop()
            stop_ingest()
