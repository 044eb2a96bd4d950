"""Fixtures of the scoring worker tests: real checkpoints in a local object store, job directories, and a
real gRPC server standing in for the scorer's ReportScoringResult that records what it receives."""

from __future__ import annotations

import json
import tarfile
import tempfile
from collections.abc import Callable, Iterator, Sequence
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest

from stash.rm.v1 import scorer_pb2, scorer_pb2_grpc
from stash_common.rendering import render_trace
from stash_common.steps import TraceStep
from stash_common.storage import ObjectStore, make_object_store
from stash_scorer.job_contract import (
    ActionScoreItem,
    ScoreItem,
    ScoreJob,
    ScoreRun,
    write_action_score_items,
    write_job,
    write_score_items,
)
from support.agent_traces import action_examples, conversation, corpus
from support.reward_models import MERGING_PATTERN, save_tiny_qwen3, word_tokenizer

OWNER = "owner-1"
MODEL_ID = "model-1"
ARCHIVE_KEY = f"reward-models/{OWNER}/{MODEL_ID}.tar.gz"
ACTION_STATS = {"mean": 0.05, "std": 0.02}
TRACES = {"t-long": conversation("t-long", 24, seed=1), "t-short": conversation("t-short", 5, seed=2)}


class RecordingScorer(scorer_pb2_grpc.ScorerServiceServicer):
    """ReportScoringResult that records each request (and `events`), refusing the traces in `refused`."""

    def __init__(self, events: list[str]) -> None:
        self.reports: list[scorer_pb2.ReportScoringResultRequest] = []
        self.events = events
        self.refused: set[str] = set()

    def ReportScoringResult(
        self, request: scorer_pb2.ReportScoringResultRequest, context: grpc.ServicerContext
    ) -> scorer_pb2.ReportScoringResultResponse:
        self.reports.append(request)
        self.events.append(f"report {request.trace_id}")
        if request.trace_id in self.refused:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"trace {request.trace_id} changed while it was scored")
        return scorer_pb2.ReportScoringResultResponse()


@dataclass
class Scorer:
    """The stand-in scorer: where it listens and what it has received."""

    address: str
    servicer: RecordingScorer
    events: list[str] = field(default_factory=list)

    def by_trace(self) -> dict[str, scorer_pb2.ReportScoringResultRequest]:
        return {report.trace_id: report for report in self.servicer.reports}


@pytest.fixture
def scorer() -> Iterator[Scorer]:
    events: list[str] = []
    servicer = RecordingScorer(events)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    scorer_pb2_grpc.add_ScorerServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield Scorer(f"127.0.0.1:{port}", servicer, events)
    server.stop(0)


@pytest.fixture
def objects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ObjectStore:
    """The local object store of a fresh data directory, which the worker finds through STASH_DATA_DIR."""
    data_dir = tmp_path / "data"
    for name in ("STASH_S3_BUCKET", "STASH_S3_ENDPOINT_URL", "STASH_S3_REGION", "STASH_SIGNING_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("STASH_DATA_DIR", str(data_dir))
    return make_object_store(data_dir, None, None, None, "http://127.0.0.1:1", None)


def upload_checkpoint(objects: ObjectStore, model_dir: Path, key: str = ARCHIVE_KEY) -> None:
    """Store `model_dir` as the trainer does: a tar.gz holding it as `model/`."""
    with tempfile.TemporaryDirectory() as scratch:
        archive = Path(scratch) / "model.tar.gz"
        with tarfile.open(archive, "w:gz") as tar:
            tar.add(model_dir, arcname="model")
        objects.put_file(key, archive)


@pytest.fixture(scope="session")
def decoder_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A randomly initialised tiny Qwen3 reward model with action statistics, as a trained model is saved."""
    directory = save_tiny_qwen3(
        tmp_path_factory.mktemp("qwen3") / "model", word_tokenizer(corpus(*TRACES.values()), MERGING_PATTERN)
    )
    (directory / "action_reward_stats.json").write_text(json.dumps(ACTION_STATS))
    return directory


@pytest.fixture(scope="session")
def encoder_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The packaged MiniLM with a fresh seeded reward head and action statistics, saved as a checkpoint."""
    import torch

    from stash_common.reward_model.checkpoint import load_checkpoint
    from stash_common.reward_model.packaged import packaged_model_dir

    torch.manual_seed(0)
    model, tokenizer = load_checkpoint(packaged_model_dir(), "cpu", 256)
    directory = tmp_path_factory.mktemp("minilm") / "model"
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    (directory / "action_reward_stats.json").write_text(json.dumps(ACTION_STATS))
    return directory


JobWriter = Callable[..., Path]


@pytest.fixture
def job_dir(tmp_path: Path, scorer: Scorer) -> JobWriter:
    """`write(traces={id: steps}, max_length=256)`: a job directory as the scorer service writes it."""

    def write(traces: dict[str, Sequence[TraceStep]] = TRACES, max_length: int = 256) -> Path:
        directory = tmp_path / "job"
        directory.mkdir()
        runs = [
            ScoreRun(scoring_run_id=f"run-{trace_id}", owner_id=OWNER, trace_id=trace_id, trace_revision=3)
            for trace_id in traces
        ]
        job = ScoreJob(
            job_id="job-1",
            reward_model_id=MODEL_ID,
            reward_model_key=ARCHIVE_KEY,
            max_length=max_length,
            batch_size=4,
            scorer_address=scorer.address,
            runs=runs,
        )
        write_job(directory, job)
        write_action_score_items(
            directory,
            (
                ActionScoreItem(trace_id=trace_id, step_id=step_id, text=text)
                for trace_id, steps in traces.items()
                for step_id, text in action_examples(tuple(steps))
            ),
        )
        write_score_items(
            directory, (ScoreItem(trace_id=trace_id, text=render_trace(steps)) for trace_id, steps in traces.items())
        )
        return directory

    return write
