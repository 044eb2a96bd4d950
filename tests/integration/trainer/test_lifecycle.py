"""The reward-model lifecycle on PostgreSQL: claims, retries, remote job reports, the recovery sweep, and the
publication of a succeeded model's training scores to a scorer on a real gRPC port."""

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import struct_pb2

from stash.rm.v1 import common_pb2, scorer_pb2, scorer_pb2_grpc, trainer_pb2, trainer_pb2_grpc
from stash_common.channels import open_channel
from stash_common.coordination import InProcessWakeups
from stash_common.db import make_engine, make_sessions, transaction, upgrade, utc_now
from stash_common.errors import FailedPrecondition
from stash_common.launcher import LocalSubprocessLauncher
from stash_common.server import start
from stash_common.steps import TraceStep
from stash_common.storage import LocalObjectStore
from stash_common.training_metrics import TRAINING_METRIC_KEYS
from stash_trainer import store
from stash_trainer.api import TrainerServicer
from stash_trainer.clients import ScoreClient
from stash_trainer.jobs import TRACE_REVISIONS, WORKER_MODULE, Dispatcher, JobSettings
from stash_trainer.pairs.inputs import Annotation, SourceTrace
from support.processes import free_port

OWNER = "owner-a"


@pytest.fixture
def sessions(postgres_url: str) -> Iterator[Any]:
    upgrade("trainer", store.MIGRATIONS_DIR, postgres_url)
    engine = make_engine(postgres_url)
    yield make_sessions(engine)
    engine.dispose()


def _queued(sessions: Any, **fields: Any) -> str:
    row = store.RewardModelRow(
        owner_id=OWNER,
        name="m",
        base_model="base",
        compute="local",
        epochs=1,
        max_pairs=4000,
        training_config={},
        trace_ids=["t1", "t2"],
        progress={},
        **fields,
    )
    with transaction(sessions) as session:
        session.add(row)
    return row.id


def test_only_one_of_two_claimers_wins(sessions: Any) -> None:
    model_id = _queued(sessions)

    with transaction(sessions) as first, transaction(sessions) as second:
        won = store.claim(first, model_id)
        first.commit()
        lost = store.claim(second, model_id)

    assert won is not None and lost is None
    with transaction(sessions) as session:
        row = session.get(store.RewardModelRow, model_id)
        assert (row.status, row.job_id) == ("running", won)


def test_only_a_failed_model_can_be_retried_and_it_keeps_its_id_and_traces(sessions: Any) -> None:
    model_id = _queued(sessions)
    with transaction(sessions) as session, pytest.raises(FailedPrecondition, match="only a failed reward model"):
        store.retry(session, OWNER, model_id)
    with transaction(sessions) as session:
        row = session.get(store.RewardModelRow, model_id)
        row.status, row.error, row.num_pairs, row.feedback = "failed", "boom", 1, []

    with transaction(sessions) as session:
        row = store.retry(session, OWNER, model_id)
        assert (row.id, row.status, row.trace_ids, row.error, row.feedback) == (
            model_id,
            "queued",
            ["t1", "t2"],
            None,
            None,
        )


def test_the_sweep_fails_interrupted_submissions_and_overdue_jobs(sessions: Any) -> None:
    long_ago = utc_now() - timedelta(hours=2)
    interrupted = _queued(sessions, status="running", job_id="j1", claimed_at=long_ago)
    overdue = _queued(sessions, status="running", job_id="j2", claimed_at=long_ago, started_at=long_ago)
    fresh = _queued(sessions, status="running", job_id="j3", claimed_at=utc_now(), started_at=utc_now())

    with transaction(sessions) as session:
        failed = store.fail_stale(session, timedelta(minutes=35), timedelta(minutes=70))

    assert set(failed) == {interrupted, overdue}
    with transaction(sessions) as session:
        rows = {row.id: row for row in session.query(store.RewardModelRow)}
    assert "interrupted before it started (over 35 minutes)" in rows[interrupted].error
    assert "did not finish within 70 minutes" in rows[overdue].error
    assert rows[fresh].status == "running"


@pytest.fixture
def unreachable_scorer() -> Iterator[ScoreClient]:
    """A scorer client whose address nothing listens on."""
    channel = open_channel(f"127.0.0.1:{free_port()}")
    yield ScoreClient(scorer_pb2_grpc.ScorerServiceStub(channel))
    channel.close()


def _dispatcher(sessions: Any, scores: ScoreClient, tmp_path: Path, traces: Any = None, **settings: Any) -> Dispatcher:
    return Dispatcher(
        sessions,
        traces,
        scores,
        LocalObjectStore(tmp_path / "artifacts", "http://127.0.0.1:1", b"k" * 32),
        LocalSubprocessLauncher(WORKER_MODULE),
        InProcessWakeups(),
        JobSettings(tmp_path / "jobs", **settings),
    )


@pytest.fixture
def trainer(sessions: Any, tmp_path: Any, unreachable_scorer: ScoreClient) -> Iterator[Any]:
    dispatcher = _dispatcher(sessions, unreachable_scorer, tmp_path)
    objects = dispatcher.objects
    servicer = TrainerServicer(sessions, None, objects, dispatcher, "base", "local")

    def register(server: grpc.Server) -> list[str]:
        trainer_pb2_grpc.add_TrainerServiceServicer_to_server(servicer, server)
        return ["stash.rm.v1.TrainerService"]

    running = start(register, "127.0.0.1", 0)
    channel = open_channel(f"127.0.0.1:{running.port}")
    yield trainer_pb2_grpc.TrainerServiceStub(channel)
    channel.close()
    running.stop(0)


def _metrics(**values: Any) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    message.update(values)
    return message


def test_a_remote_job_reports_progress_and_completes(sessions: Any, trainer: Any) -> None:
    model_id = _queued(sessions)
    with transaction(sessions) as session:
        job_id = store.claim(session, model_id)

    trainer.ReportJobProgress(
        trainer_pb2.ReportJobProgressRequest(
            owner_id=OWNER, reward_model_id=model_id, job_id=job_id, progress=_metrics(step=3, loss=0.5)
        ),
        timeout=10,
    )
    done = trainer.CompleteJob(
        trainer_pb2.CompleteJobRequest(
            owner_id=OWNER,
            reward_model_id=model_id,
            job_id=job_id,
            status=common_pb2.JOB_STATUS_SUCCEEDED,
            metrics=_metrics(**{**dict.fromkeys(TRAINING_METRIC_KEYS), "train_pairs": 10}),
            artifact_key=f"reward-models/{OWNER}/{model_id}.tar.gz",
        ),
        timeout=10,
    ).reward_model

    assert done.status == common_pb2.JOB_STATUS_SUCCEEDED
    assert done.progress["step"] == 3 and done.metrics["train_pairs"] == 10


def test_reports_from_a_superseded_launch_are_refused(sessions: Any, trainer: Any) -> None:
    model_id = _queued(sessions)
    with transaction(sessions) as session:
        store.claim(session, model_id)

    with pytest.raises(grpc.RpcError) as raised:
        trainer.CompleteJob(
            trainer_pb2.CompleteJobRequest(
                owner_id=OWNER, reward_model_id=model_id, job_id="an-old-launch", status=common_pb2.JOB_STATUS_FAILED
            ),
            timeout=10,
        )

    assert raised.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(grpc.RpcError) as other_owner:
        trainer.GetRewardModel(
            trainer_pb2.GetRewardModelRequest(owner_id="owner-b", reward_model_id=model_id), timeout=10
        )
    assert other_owner.value.code() == grpc.StatusCode.NOT_FOUND


def test_a_remote_job_reporting_other_metric_keys_is_refused_and_keeps_running(sessions: Any, trainer: Any) -> None:
    model_id = _queued(sessions)
    with transaction(sessions) as session:
        job_id = store.claim(session, model_id)

    with pytest.raises(grpc.RpcError) as raised:
        trainer.CompleteJob(
            trainer_pb2.CompleteJobRequest(
                owner_id=OWNER,
                reward_model_id=model_id,
                job_id=job_id,
                status=common_pb2.JOB_STATUS_SUCCEEDED,
                metrics=_metrics(train_pairs=10, loss=0.5),
                artifact_key=f"reward-models/{OWNER}/{model_id}.tar.gz",
            ),
            timeout=10,
        )

    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "missing action_eval_accuracy," in raised.value.details() and "unknown loss" in raised.value.details()
    with transaction(sessions) as session:
        assert session.get(store.RewardModelRow, model_id).status == "running"


def test_a_local_result_with_other_metric_keys_fails_the_model(
    sessions: Any, tmp_path: Path, unreachable_scorer: ScoreClient
) -> None:
    model_id = _queued(sessions)
    with transaction(sessions) as session:
        job_id = store.claim(session, model_id)
    job_dir = tmp_path / "jobs" / job_id
    job_dir.mkdir(parents=True)
    (job_dir / "result.json").write_text(json.dumps({"metrics": {"train_pairs": 10}}))

    _dispatcher(sessions, unreachable_scorer, tmp_path).finish(model_id, job_id, job_dir)

    with transaction(sessions) as session:
        row = session.get(store.RewardModelRow, model_id)
        assert (row.status, row.metrics, row.artifact_key) == ("failed", None, None)
        assert row.error.startswith("the worker's result.json is unusable: metrics: missing action_eval_accuracy,")


class _RecordingScorer(scorer_pb2_grpc.ScorerServiceServicer):
    """Stands in for the scorer: records each publication and the model's status when it arrived."""

    def __init__(self, sessions: Any) -> None:
        self.sessions = sessions
        self.requests: list[scorer_pb2.PublishTrainingScoresRequest] = []
        self.statuses: list[str] = []

    def PublishTrainingScores(
        self, request: scorer_pb2.PublishTrainingScoresRequest, context: grpc.ServicerContext
    ) -> scorer_pb2.PublishTrainingScoresResponse:
        with transaction(self.sessions) as session:
            self.statuses.append(session.get(store.RewardModelRow, request.reward_model_id).status)
        self.requests.append(request)
        return scorer_pb2.PublishTrainingScoresResponse(published_traces=len(request.traces))


@pytest.fixture
def recording_scorer(sessions: Any) -> Iterator[tuple[_RecordingScorer, ScoreClient]]:
    recorder = _RecordingScorer(sessions)

    def register(server: grpc.Server) -> list[str]:
        scorer_pb2_grpc.add_ScorerServiceServicer_to_server(recorder, server)
        return ["stash.rm.v1.ScorerService"]

    running = start(register, "127.0.0.1", 0)
    channel = open_channel(f"127.0.0.1:{running.port}")
    yield recorder, ScoreClient(scorer_pb2_grpc.ScorerServiceStub(channel))
    channel.close()
    running.stop(0)


def _finished_job_dir(sessions: Any, tmp_path: Path) -> tuple[str, str, Path]:
    """A claimed model whose worker succeeded, scoring two actions of t1 and the whole of t1 (t2 had nothing)."""
    model_id = _queued(sessions)
    with transaction(sessions) as session:
        job_id = store.claim(session, model_id)
    job_dir = tmp_path / "jobs" / job_id
    (job_dir / "model").mkdir(parents=True)
    (job_dir / "model" / "config.json").write_text("{}")
    (job_dir / "job.json").write_text(json.dumps({"kind": "train", TRACE_REVISIONS: {"t1": 3, "t2": 1}}))
    metrics = {**dict.fromkeys(TRAINING_METRIC_KEYS), "train_pairs": 10, "action_scoring_version": 1}
    (job_dir / "result.json").write_text(json.dumps({"metrics": metrics}))
    (job_dir / "scores.jsonl").write_text(json.dumps({"trace_id": "t1", "score": 0.5}) + "\n")
    actions = [("s1", 1.5, 0.25), ("s3", -0.5, -0.75)]
    (job_dir / "action_scores.jsonl").write_text(
        "".join(json.dumps({"trace_id": "t1", "step_id": s, "score": v, "credit": c}) + "\n" for s, v, c in actions)
    )
    return model_id, job_id, job_dir


def test_a_succeeded_model_publishes_its_training_scores_after_it_is_recorded(
    sessions: Any, tmp_path: Path, recording_scorer: tuple[_RecordingScorer, ScoreClient]
) -> None:
    recorder, client = recording_scorer
    model_id, job_id, job_dir = _finished_job_dir(sessions, tmp_path)

    _dispatcher(sessions, client, tmp_path).finish(model_id, job_id, job_dir)

    (request,) = recorder.requests
    assert recorder.statuses == [store.SUCCEEDED]
    assert (request.owner_id, request.reward_model_id) == (OWNER, model_id)
    first, second = request.traces
    assert (first.trace_id, first.trace_revision, first.trace_score) == ("t1", 3, 0.5)
    assert [(a.step_id, a.score, a.credit) for a in first.action_scores] == [("s1", 1.5, 0.25), ("s3", -0.5, -0.75)]
    assert (second.trace_id, second.trace_revision, second.HasField("trace_score")) == ("t2", 1, False)
    assert list(second.action_scores) == []
    assert not job_dir.exists()


def test_an_unreachable_scorer_leaves_the_model_succeeded(
    sessions: Any, tmp_path: Path, unreachable_scorer: ScoreClient
) -> None:
    model_id, job_id, job_dir = _finished_job_dir(sessions, tmp_path)

    _dispatcher(sessions, unreachable_scorer, tmp_path).finish(model_id, job_id, job_dir)

    with transaction(sessions) as session:
        row = session.get(store.RewardModelRow, model_id)
        assert (row.status, row.error) == (store.SUCCEEDED, None)
        assert row.artifact_key == f"reward-models/{OWNER}/{model_id}.tar.gz"
    assert not job_dir.exists()


class _RatedTraces:
    """Stands in for ingest and the labeler: each trace at its own revision, its lookup rated + and its answer −."""

    def source_trace(self, owner_id: str, trace_id: str) -> SourceTrace:
        steps = (
            TraceStep("u", 0, "user", f"I want a refund ({trace_id})"),
            TraceStep(f"{trace_id}-call", 1, "assistant", "", "lookup_order", {"order_id": trace_id}, "c1"),
            TraceStep("r", 2, "tool", "delivered", "lookup_order", None, "c1"),
            TraceStep(f"{trace_id}-answer", 3, "assistant", "I cannot help with that."),
        )
        ratings = (Annotation("a1", f"{trace_id}-call", 1, None), Annotation("a2", f"{trace_id}-answer", -1, None))
        return SourceTrace(trace_id, steps, ratings, revision={"t1": 7, "t2": 2}[trace_id])


def test_the_job_directory_keeps_the_revisions_read_and_the_device(
    sessions: Any, tmp_path: Path, unreachable_scorer: ScoreClient
) -> None:
    model_id = _queued(sessions)
    with transaction(sessions) as session:
        job_id = store.claim(session, model_id)

    dispatcher = _dispatcher(sessions, unreachable_scorer, tmp_path, _RatedTraces(), device="cpu")
    job_dir = dispatcher.prepare(model_id, job_id)

    job = json.loads((job_dir / "job.json").read_text())
    assert (job["device"], job[TRACE_REVISIONS]) == ("cpu", {"t1": 7, "t2": 2})
    items = [json.loads(line) for line in (job_dir / "action_score_items.jsonl").read_text().splitlines()]
    assert [item["step_id"] for item in items] == ["t1-call", "t1-answer", "t2-call", "t2-answer"]
