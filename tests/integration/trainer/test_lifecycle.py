"""The reward-model lifecycle on PostgreSQL: claims, retries, worker reports, the recovery sweep, the job's files in
object storage, and the publication of a succeeded model's training scores to a scorer on a real gRPC port."""

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
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
from stash_common.jobs.kubernetes import KubernetesJobSettings, KubernetesLauncher
from stash_common.jobs.launch import JobEnd
from stash_common.jobs.local import LocalSubprocessLauncher
from stash_common.jobs.transfer import job_key
from stash_common.server import start
from stash_common.steps import TraceStep
from stash_common.storage import LocalObjectStore
from stash_common.training_metrics import TRAINING_METRIC_KEYS
from stash_trainer import store
from stash_trainer.api import TrainerServicer
from stash_trainer.clients import ScoreClient
from stash_trainer.dispatcher import TRACE_REVISIONS, Dispatcher, JobSettings, archive_key
from stash_trainer.pairs.inputs import Annotation, SourceTrace
from support.kubernetes_api import emulated_kubernetes
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


def test_only_a_failed_model_can_be_retried_and_it_keeps_its_id_traces_and_last_report(sessions: Any) -> None:
    model_id = _queued(sessions)
    with transaction(sessions) as session, pytest.raises(FailedPrecondition, match="only a failed reward model"):
        store.retry(session, OWNER, model_id)
    with transaction(sessions) as session:
        row = session.get(store.RewardModelRow, model_id)
        row.status, row.error, row.num_pairs, row.feedback = "failed", "boom", 1, []
        row.job_id = row.feedback_job_id = "job-1"
        assert not store.feedback_from_earlier_attempt(row)

    with transaction(sessions) as session:
        row = store.retry(session, OWNER, model_id)
        assert (row.id, row.status, row.trace_ids, row.error, row.num_pairs) == (
            model_id,
            "queued",
            ["t1", "t2"],
            None,
            None,
        )
        # The last report stays visible, marked as the earlier attempt's, until this launch records its own.
        assert row.feedback == [] and store.feedback_from_earlier_attempt(row)


@pytest.fixture(params=["postgresql", "sqlite"])
def either_sessions(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """Sessions on PostgreSQL (cluster profile) and on SQLite (embedded), which hands back naive datetimes."""
    url = request.getfixturevalue("postgres_url") if request.param == "postgresql" else f"sqlite:///{tmp_path}/t.db"
    upgrade("trainer", store.MIGRATIONS_DIR, url)
    engine = make_engine(url)
    yield make_sessions(engine)
    engine.dispose()


def test_the_sweep_fails_interrupted_submissions_and_overdue_jobs(either_sessions: Any) -> None:
    sessions = either_sessions
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
        LocalSubprocessLauncher(tmp_path / "logs"),
        InProcessWakeups(),
        JobSettings("127.0.0.1:1", **settings),
    )


@contextmanager
def _serving(sessions: Any, dispatcher: Dispatcher) -> Iterator[Any]:
    """A trainer on a real gRPC port around `dispatcher`; its stub."""
    servicer = TrainerServicer(sessions, None, None, dispatcher.objects, dispatcher, "base", "local")

    def register(server: grpc.Server) -> list[str]:
        trainer_pb2_grpc.add_TrainerServiceServicer_to_server(servicer, server)
        return ["stash.rm.v1.TrainerService"]

    running = start(register, "127.0.0.1", 0)
    channel = open_channel(f"127.0.0.1:{running.port}")
    yield trainer_pb2_grpc.TrainerServiceStub(channel)
    channel.close()
    running.stop(0)


@pytest.fixture
def trainer(sessions: Any, tmp_path: Any, unreachable_scorer: ScoreClient) -> Iterator[Any]:
    with _serving(sessions, _dispatcher(sessions, unreachable_scorer, tmp_path)) as stub:
        yield stub


def _metrics(**values: Any) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    message.update(values)
    return message


def _store_archive(tmp_path: Path, model_id: str) -> str:
    """A checkpoint archive where the model's worker uploads it (the trainer only checks that it is there)."""
    key = archive_key(OWNER, model_id)
    LocalObjectStore(tmp_path / "artifacts", "http://127.0.0.1:1", b"k" * 32).put(key, b"an archive")
    return key


def test_a_worker_reports_progress_and_completes(sessions: Any, trainer: Any, tmp_path: Path) -> None:
    model_id = _queued(sessions)
    with transaction(sessions) as session:
        job_id = store.claim(session, model_id)
    key = _store_archive(tmp_path, model_id)

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
            artifact_key=key,
        ),
        timeout=10,
    ).reward_model

    assert done.status == common_pb2.JOB_STATUS_SUCCEEDED
    assert done.progress["step"] == 3 and done.metrics["train_pairs"] == 10


@pytest.mark.parametrize(
    ("stored", "reported", "refusal"),
    [
        (False, "own", "no checkpoint archive is stored at reward-models/owner-a/"),
        (True, "reward-models/owner-b/other.tar.gz", "must be reward-models/owner-a/"),
    ],
)
def test_a_success_must_name_the_models_own_stored_archive(
    sessions: Any, trainer: Any, tmp_path: Path, stored: bool, reported: str, refusal: str
) -> None:
    model_id = _queued(sessions)
    with transaction(sessions) as session:
        job_id = store.claim(session, model_id)
    key = _store_archive(tmp_path, model_id) if stored else archive_key(OWNER, model_id)

    with pytest.raises(grpc.RpcError) as raised:
        trainer.CompleteJob(
            trainer_pb2.CompleteJobRequest(
                owner_id=OWNER,
                reward_model_id=model_id,
                job_id=job_id,
                status=common_pb2.JOB_STATUS_SUCCEEDED,
                metrics=_metrics(**dict.fromkeys(TRAINING_METRIC_KEYS)),
                artifact_key=key if reported == "own" else reported,
            ),
            timeout=10,
        )

    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT and refusal in raised.value.details()
    with transaction(sessions) as session:
        assert session.get(store.RewardModelRow, model_id).status == "running"


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


def test_a_worker_that_ends_without_reporting_fails_the_model_with_how_it_ended(
    sessions: Any, tmp_path: Path, unreachable_scorer: ScoreClient
) -> None:
    model_id = _queued(sessions)
    with transaction(sessions) as session:
        job_id = store.claim(session, model_id)

    dispatcher = _dispatcher(sessions, unreachable_scorer, tmp_path)
    dispatcher.job_ended(model_id, job_id, JobEnd(False, "the worker exited with code 1; x.log: MemoryError"))

    with transaction(sessions) as session:
        row = session.get(store.RewardModelRow, model_id)
        assert (row.status, row.progress["stage"]) == ("failed", "failed")
        assert row.error == (
            "the trainer worker ended without reporting a result: the worker exited with code 1; x.log: MemoryError"
        )


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
        return scorer_pb2.PublishTrainingScoresResponse(published_traces=1)


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


def _finished_job(sessions: Any, tmp_path: Path) -> tuple[str, trainer_pb2.CompleteJobRequest]:
    """A claimed model whose worker uploaded its archive and scores (which stay where it left them)."""
    model_id = _queued(sessions)
    with transaction(sessions) as session:
        job_id = store.claim(session, model_id)
    metrics = {**dict.fromkeys(TRAINING_METRIC_KEYS), "train_pairs": 10, "action_scoring_version": 1}
    request = trainer_pb2.CompleteJobRequest(
        owner_id=OWNER,
        reward_model_id=model_id,
        job_id=job_id,
        status=common_pb2.JOB_STATUS_SUCCEEDED,
        metrics=_metrics(**metrics),
        artifact_key=_store_archive(tmp_path, model_id),
    )
    return model_id, request


def test_once_a_succeeded_models_worker_ended_the_scorer_gets_the_jobs_key_not_its_files(
    sessions: Any, tmp_path: Path, recording_scorer: tuple[_RecordingScorer, ScoreClient]
) -> None:
    recorder, client = recording_scorer
    model_id, request = _finished_job(sessions, tmp_path)
    dispatcher = _dispatcher(sessions, client, tmp_path)

    with _serving(sessions, dispatcher) as trainer:
        trainer.CompleteJob(request, timeout=10)
        assert recorder.requests == []  # the worker's own call relays nothing
        dispatcher.job_ended(model_id, request.job_id, JobEnd(True, exit_code=0))

    (published,) = recorder.requests
    assert recorder.statuses == [store.SUCCEEDED]
    assert (published.owner_id, published.reward_model_id) == (OWNER, model_id)
    assert published.job_key == job_key("trainer", request.job_id)


def test_a_repeated_completion_report_changes_nothing(sessions: Any, trainer: Any, tmp_path: Path) -> None:
    model_id, request = _finished_job(sessions, tmp_path)
    first = trainer.CompleteJob(request, timeout=10).reward_model
    with transaction(sessions) as session:
        finished_at = session.get(store.RewardModelRow, model_id).finished_at

    again = trainer.CompleteJob(request, timeout=10).reward_model
    failed = trainer_pb2.CompleteJobRequest(
        owner_id=OWNER, reward_model_id=model_id, job_id=request.job_id, status=common_pb2.JOB_STATUS_FAILED
    )
    late_failure = trainer.CompleteJob(failed, timeout=10).reward_model

    assert first == again == late_failure
    assert first.status == common_pb2.JOB_STATUS_SUCCEEDED
    with transaction(sessions) as session:
        row = session.get(store.RewardModelRow, model_id)
        assert (row.status, row.error, row.finished_at) == (store.SUCCEEDED, None, finished_at)


def test_an_unreachable_scorer_leaves_the_model_succeeded(
    sessions: Any, tmp_path: Path, unreachable_scorer: ScoreClient
) -> None:
    model_id, request = _finished_job(sessions, tmp_path)
    dispatcher = _dispatcher(sessions, unreachable_scorer, tmp_path)

    with _serving(sessions, dispatcher) as trainer:
        trainer.CompleteJob(request, timeout=10)
        dispatcher.job_ended(model_id, request.job_id, JobEnd(True, exit_code=0))

    with transaction(sessions) as session:
        row = session.get(store.RewardModelRow, model_id)
        assert (row.status, row.error, row.progress["stage"]) == (store.SUCCEEDED, None, "done")
        assert row.artifact_key == f"reward-models/{OWNER}/{model_id}.tar.gz"


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


def test_the_uploaded_job_keeps_the_revisions_read_the_device_and_where_to_report(
    sessions: Any, tmp_path: Path, unreachable_scorer: ScoreClient
) -> None:
    model_id = _queued(sessions)
    with transaction(sessions) as session:
        row = session.get(store.RewardModelRow, model_id)
        row.feedback, row.feedback_job_id = [], "an-earlier-launch"  # what a retry keeps
        job_id = store.claim(session, model_id)

    dispatcher = _dispatcher(sessions, unreachable_scorer, tmp_path, _RatedTraces(), device="cpu")
    key = dispatcher.prepare(model_id, job_id)

    with transaction(sessions) as session:  # no provider: this launch records that no extraction ran
        row = session.get(store.RewardModelRow, model_id)
        assert (row.feedback, row.feedback_job_id, store.feedback_from_earlier_attempt(row)) == (None, job_id, False)

    assert key == f"jobs/trainer/{job_id}"
    job = json.loads(dispatcher.objects.get(f"{key}/job.json"))
    assert (job["device"], job[TRACE_REVISIONS]) == ("cpu", {"t1": 7, "t2": 2})
    assert (job["job_id"], job["reward_model_id"], job["report_address"]) == (job_id, model_id, "127.0.0.1:1")
    assert job["archive_key"] == archive_key(OWNER, model_id)
    assert dispatcher.objects.exists(f"{key}/pairs.jsonl")
    items = [json.loads(line) for line in dispatcher.objects.get(f"{key}/action_score_items.jsonl").splitlines()]
    assert [item["step_id"] for item in items] == ["t1-call", "t1-answer", "t2-call", "t2-answer"]


def _settled_model(sessions: Any, model_id: str) -> store.RewardModelRow:
    """The model once a watcher has settled it (or after 30 s)."""
    deadline = time.monotonic() + 30
    while True:
        with transaction(sessions) as session:
            row = session.get(store.RewardModelRow, model_id)
            session.expunge(row)
        if row.status != "running" or time.monotonic() > deadline:
            return row
        time.sleep(0.05)


def test_a_cluster_trainer_launches_a_kubernetes_job_that_another_replica_settles(
    sessions: Any, tmp_path: Path, unreachable_scorer: ScoreClient
) -> None:
    model_id = _queued(sessions)
    with transaction(sessions) as session:
        job_id = store.claim(session, model_id)
    settings = KubernetesJobSettings(namespace="stash", relist_interval_s=2, watch_timeout_s=1)
    objects = LocalObjectStore(tmp_path / "artifacts", "http://127.0.0.1:1", b"k" * 32)

    def dispatcher(launcher: KubernetesLauncher) -> Dispatcher:
        wakeups = InProcessWakeups()
        return Dispatcher(sessions, _RatedTraces(), unreachable_scorer, objects, launcher, wakeups, JobSettings("t:1"))

    with emulated_kubernetes() as kube:
        first = KubernetesLauncher(settings, kube.api_client)
        launching = dispatcher(first)
        launched = launching.run_claimed(model_id, job_id)
        name = f"stash-train-{job_id}"
        command = kube.batch.read_namespaced_job(name, "stash").spec.template.spec.containers[0].command
        launching.stop()  # this replica goes away; its Job runs on
        first.stop()
        replica_launcher = KubernetesLauncher(settings, kube.api_client)
        replica = dispatcher(replica_launcher)

        adopted = replica.adopt_running()
        deadline = "Job was active longer than specified deadline"
        condition = {"type": "Failed", "status": "True", "reason": "DeadlineExceeded", "message": deadline}
        kube.set_job_status("stash", name, {"conditions": [condition]})
        row = _settled_model(sessions, model_id)
        replica_launcher.stop()

    assert launched is not None and launched.name == name
    assert command == ["python", "-m", "stash_common.jobs.worker", "train", "--job", f"jobs/trainer/{job_id}"]
    assert adopted == 1
    assert (row.status, row.progress["job_name"]) == ("failed", name)
    assert row.error == (
        f"the trainer worker ended without reporting a result: the Kubernetes Job {name} failed: "
        "DeadlineExceeded: Job was active longer than specified deadline"
    )
    assert not objects.exists(f"jobs/trainer/{job_id}/job.json")  # the ended job's files are deleted
