"""The GEPA run lifecycle on PostgreSQL: claims, the uploaded job, worker reports over gRPC, the sweep.

The peers are in-memory sources and the launcher stands in for the worker (it reports through a real
GepaService port, or ends without reporting), so each rule of the dispatcher is tested on its own;
the real worker runs in tests/e2e/test_rest_gepa.py.
"""

import os
import signal
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import grpc
import orjson
import pytest

import support
from stash.rm.v1 import gepa_pb2, gepa_pb2_grpc
from stash_common.channels import open_channel
from stash_common.coordination import InProcessWakeups
from stash_common.db import make_engine, make_sessions, transaction, upgrade, utc_now
from stash_common.errors import FailedPrecondition, NotFound
from stash_common.jobs.kubernetes import KubernetesJobSettings, KubernetesLauncher
from stash_common.jobs.launch import JobEnd, JobLaunch
from stash_common.jobs.local import LocalSubprocessLauncher
from stash_common.jobs.transfer import download_files, job_key
from stash_common.server import start
from stash_common.steps import TraceStep
from stash_common.storage import LocalObjectStore
from stash_gepa import job_contract as contract
from stash_gepa import store
from stash_gepa.api import GepaServicer, default_models, run_to_proto
from stash_gepa.dispatcher import Dispatcher, JobSettings, RewardModelInfo
from stash_gepa.examples import ExampleTrace, Finding
from support.kubernetes_api import emulated_kubernetes
from support.scorer import wait_until
from support.sleeping_worker import PID_VARIABLE, is_alive, worker_pid

OWNER = "owner-a"
SKILL = "---\nname: refunds\ndescription: Use for refunds.\n---\n\n# Body"


@pytest.fixture
def sessions(postgres_url: str) -> Iterator[Any]:
    upgrade("gepa", store.MIGRATIONS_DIR, postgres_url)
    engine = make_engine(postgres_url)
    yield make_sessions(engine)
    engine.dispose()


@dataclass
class Models:
    status: str = "succeeded"
    trace_ids: tuple[str, ...] = ("t1", "t2", "t3", "t4")
    deleted: bool = False

    def reward_model(self, owner_id: str, model_id: str) -> RewardModelInfo:
        if self.deleted:
            raise NotFound(f"reward model {model_id} not found")
        findings = {"t1": (Finding(1, "negative", "high", "no apology", None, True),)}
        return RewardModelInfo(model_id, "m", self.status, "reward-models/a/m.tar.gz", self.trace_ids, findings)

    def training_pairs(self, owner_id: str, model_id: str) -> list[dict[str, Any]]:
        return [{"trace_ids": ["t1", "t2"], "granularity": "trace", "chosen_trace_id": "t2", "source": "explicit"}]


@dataclass
class Traces:
    deleted: set[str] = field(default_factory=set)
    opening_with_assistant: set[str] = field(default_factory=set)

    def example_trace(
        self, owner_id: str, trace_id: str, findings: Sequence[Finding], pairs: Sequence[Mapping[str, Any]]
    ) -> ExampleTrace:
        if trace_id in self.deleted:
            raise NotFound(f"trace {trace_id} not found")
        roles = ["assistant", "user"] if trace_id in self.opening_with_assistant else ["user", "assistant"]
        steps = tuple(TraceStep(f"{trace_id}-{i}", i, role, f"{role} text") for i, role in enumerate(roles))  # type: ignore[arg-type]
        return ExampleTrace(trace_id, steps, (), tuple(findings), tuple(pairs))


@dataclass
class Ended:
    """A worker that has already ended as `end` says."""

    name: str
    end: JobEnd

    def wait(self, timeout_s: float) -> JobEnd | None:
        return self.end

    def kill(self) -> None:
        pass


@dataclass
class StandInLauncher:
    """Launches nothing: `worker` does what the worker would (report, or not) before it ends as `end` says."""

    end: JobEnd = JobEnd(True)
    worker: Callable[[JobLaunch], object] = lambda job: None
    launched: list[JobLaunch] = field(default_factory=list)
    detached = False

    def launch(self, job: JobLaunch) -> Ended:
        self.launched.append(job)
        self.worker(job)
        return Ended(job.name, self.end)

    def recover(self, name: str) -> Ended | None:
        return None


SUCCESS = contract.GepaResult(
    skill_name="refunds",
    skill_description="Use for refunds.",
    best_skill=SKILL,
    best_score=0.7,
    seed_skill=SKILL.replace("Body", "Seed"),
    seed_score=0.4,
    candidates=[
        contract.Candidate(skill=SKILL.replace("Body", "Seed"), score=0.4),
        contract.Candidate(skill=SKILL, score=0.7),
    ],
    metric_calls=40,
)


def _dispatcher(
    sessions: Any, tmp_path: Path, launcher: Any, models: Models | None = None, **traces: Any
) -> Dispatcher:
    settings = JobSettings("127.0.0.1:1", submit_timeout=timedelta(minutes=10), job_timeout=timedelta(hours=1))
    objects = LocalObjectStore(tmp_path / "artifacts", "http://127.0.0.1:1", b"k" * 32)
    return Dispatcher(sessions, models or Models(), Traces(**traces), objects, launcher, InProcessWakeups(), settings)


@pytest.fixture
def served(sessions: Any, tmp_path: Path) -> Iterator[tuple[StandInLauncher, Dispatcher, Any]]:
    """A GepaService on a real port whose launcher's stand-in worker reports to it; the stub too."""
    launcher = StandInLauncher()
    dispatcher = _dispatcher(sessions, tmp_path, launcher)
    servicer = GepaServicer(sessions, Models(), dispatcher, default_models(False, None))

    def register(server: grpc.Server) -> list[str]:
        gepa_pb2_grpc.add_GepaServiceServicer_to_server(servicer, server)
        return ["stash.rm.v1.GepaService"]

    running = start(register, "127.0.0.1", 0)
    channel = open_channel(f"127.0.0.1:{running.port}")
    yield launcher, dispatcher, gepa_pb2_grpc.GepaServiceStub(channel)
    channel.close()
    running.stop(0)


def _completion(
    dispatcher: Dispatcher, run_id: str, job: JobLaunch, result: Mapping[str, Any]
) -> gepa_pb2.CompleteGepaJobRequest:
    """The worker's end: its result.json stored under the job's key, and the short report naming the job."""
    dispatcher.objects.put(f"{job_key('gepa', job.job_id)}/{contract.RESULT_FILE}", orjson.dumps(dict(result)))
    return gepa_pb2.CompleteGepaJobRequest(owner_id=OWNER, gepa_run_id=run_id, job_id=job.job_id)


def _queued(sessions: Any, max_metric_calls: int = 40) -> str:
    row = store.GepaRunRow(
        owner_id=OWNER,
        reward_model_id="m1",
        task_model="openai/task",
        task_api_base="http://vllm:8000/v1",
        reflection_model="openai/reflect",
        max_metric_calls=max_metric_calls,
        progress={},
    )
    with transaction(sessions) as session:
        session.add(row)
    return row.id


def _run(sessions: Any, run_id: str) -> store.GepaRunRow:
    row = _run_or_none(sessions, run_id)
    assert row is not None
    return row


def _run_or_none(sessions: Any, run_id: str) -> store.GepaRunRow | None:
    with transaction(sessions) as session:
        row = session.get(store.GepaRunRow, run_id)
        if row is not None:
            session.expunge(row)
        return row


def _settled(sessions: Any, run_id: str) -> store.GepaRunRow:
    """The run once the dispatcher's watch thread has recorded how its (already finished) worker ended."""
    deadline = time.monotonic() + 30
    while (row := _run(sessions, run_id)).status == "running" and time.monotonic() < deadline:
        time.sleep(0.05)
    return row


def _claimed(sessions: Any, dispatcher: Dispatcher, run_id: str) -> str:
    with transaction(sessions) as session:
        job_id = store.claim(session, run_id)
    assert job_id is not None
    return job_id


def test_a_run_is_claimed_once_and_its_uploaded_job_holds_the_contract(sessions: Any, tmp_path: Path) -> None:
    dispatcher = _dispatcher(sessions, tmp_path, StandInLauncher(), deleted={"t4"})
    run_id = _queued(sessions)
    job_id = _claimed(sessions, dispatcher, run_id)
    with transaction(sessions) as session:
        assert store.claim(session, run_id) is None

    key = dispatcher.prepare(run_id, job_id)

    assert key == f"jobs/gepa/{job_id}"
    job_dir = tmp_path / "downloaded"
    job_dir.mkdir()
    assert download_files(dispatcher.objects, key, job_dir, contract.INPUT_FILES) == list(contract.INPUT_FILES)
    job = contract.read_job(job_dir)
    examples = contract.read_examples(job_dir)
    assert (job.kind, job.reward_model_key, job.task_model, job.task_api_base) == (
        "gepa",
        "reward-models/a/m.tar.gz",
        "openai/task",
        "http://vllm:8000/v1",
    )
    assert (job.reflection_model, job.max_metric_calls, job.job_id) == ("openai/reflect", 40, job_id)
    assert (job.owner_id, job.gepa_run_id, job.report_address) == (OWNER, run_id, "127.0.0.1:1")
    assert [example.trace_id for example in examples] == ["t1", "t2", "t3"]  # t4 was deleted since training
    assert len(job.validation_trace_ids) == 1 and job.reflection_minibatch_size == 2
    t1 = next(example for example in examples if example.trace_id == "t1")
    assert t1.feedback == [
        "Training judged step 1 (Assistant: assistant text) negative (high confidence): no apology.",
        "Training ranked this whole trace below another of the selected traces (explicit)",
    ]
    row = _run(sessions, run_id)
    assert (row.train_examples, row.validation_examples, row.budget_warning) == (2, 1, None)


def test_a_small_budget_is_warned_on_the_run(sessions: Any, tmp_path: Path) -> None:
    dispatcher = _dispatcher(sessions, tmp_path, StandInLauncher())
    run_id = _queued(sessions, max_metric_calls=5)

    dispatcher.prepare(run_id, _claimed(sessions, dispatcher, run_id))

    assert _run(sessions, run_id).budget_warning.startswith("max_metric_calls 5 is below 13")  # type: ignore[union-attr]


def test_a_model_retried_since_the_request_fails_the_run_with_the_reason(sessions: Any, tmp_path: Path) -> None:
    launcher = StandInLauncher()
    dispatcher = _dispatcher(sessions, tmp_path, launcher, Models(status="queued"))
    run_id = _queued(sessions)

    assert dispatcher.run_claimed(run_id, _claimed(sessions, dispatcher, run_id)) is None

    row = _run(sessions, run_id)
    assert (row.status, launcher.launched) == ("failed", [])
    assert row.error == "reward model m1 is queued: GEPA needs a succeeded model as its metric"
    assert run_to_proto(row).retryable  # the model may succeed by the time the run is retried


def test_a_run_whose_reward_model_was_deleted_fails_for_good_and_a_retry_is_refused(
    sessions: Any, tmp_path: Path
) -> None:
    dispatcher = _dispatcher(sessions, tmp_path, StandInLauncher(), Models(deleted=True))
    run_id = _queued(sessions)

    dispatcher.run_claimed(run_id, _claimed(sessions, dispatcher, run_id))

    row = _run(sessions, run_id)
    assert (row.status, row.error, run_to_proto(row).retryable) == ("failed", "reward model m1 not found", False)
    with transaction(sessions) as session, pytest.raises(FailedPrecondition, match="a retry would repeat"):
        store.retry(session, OWNER, run_id)


def test_only_a_settled_run_can_be_deleted(sessions: Any) -> None:
    run_id = _queued(sessions)

    with transaction(sessions) as session, pytest.raises(FailedPrecondition, match="is queued; it can be deleted"):
        store.delete_run(session, OWNER, run_id)
    with transaction(sessions) as session:
        store.find_run(session, OWNER, run_id).status = "failed"
    with transaction(sessions) as session, pytest.raises(NotFound):
        store.delete_run(session, "owner-b", run_id)
    with transaction(sessions) as session:
        store.delete_run(session, OWNER, run_id)

    assert _run_or_none(sessions, run_id) is None


def test_no_trace_with_input_before_the_first_assistant_step_fails_the_run(sessions: Any, tmp_path: Path) -> None:
    models = Models(trace_ids=("t1", "t2"))
    dispatcher = _dispatcher(sessions, tmp_path, StandInLauncher(), models, opening_with_assistant={"t1", "t2"})
    run_id = _queued(sessions)

    dispatcher.run_claimed(run_id, _claimed(sessions, dispatcher, run_id))

    row = _run(sessions, run_id)
    assert row.status == "failed"
    assert row.error.startswith("none of the reward model's 2 selected traces has input")  # type: ignore[union-attr]


def _gone(dispatcher: Dispatcher, key: str) -> bool:
    """Whether the job's files are deleted once its watcher has seen the worker end."""
    deadline = time.monotonic() + 30
    while dispatcher.objects.exists(f"{key}/{contract.JOB_FILE}") and time.monotonic() < deadline:
        time.sleep(0.05)
    return not dispatcher.objects.exists(f"{key}/{contract.JOB_FILE}")


def test_a_reported_result_becomes_the_runs_result_and_the_jobs_files_go(
    sessions: Any, served: tuple[StandInLauncher, Dispatcher, Any]
) -> None:
    launcher, dispatcher, stub = served
    run_id = _queued(sessions)

    def worker(job: JobLaunch) -> None:
        progress = gepa_pb2.ReportGepaProgressRequest(
            owner_id=OWNER, gepa_run_id=run_id, job_id=job.job_id, metric_calls_used=12
        )
        stub.ReportGepaProgress(progress, timeout=10)
        assert _run(sessions, run_id).progress["metric_calls_used"] == 12
        stub.CompleteGepaJob(
            _completion(dispatcher, run_id, job, SUCCESS.model_dump(mode="json", exclude_none=True)), timeout=10
        )

    launcher.worker = worker
    running = dispatcher.run_claimed(run_id, _claimed(sessions, dispatcher, run_id))
    assert running is not None

    row = _settled(sessions, run_id)

    assert (row.status, row.error, row.progress["metric_calls_used"]) == ("succeeded", None, 40)
    assert row.progress["job_name"] == running.name == launcher.launched[0].name
    assert row.result is not None and row.result["best_skill"] == SKILL and row.result["seed_score"] == 0.4
    assert _gone(dispatcher, launcher.launched[0].job_key)


@pytest.mark.parametrize(
    ("result", "end", "error"),
    [
        (
            None,
            JobEnd(False, "the worker exited with code 1; stash-gepa-x.log: boom"),
            "the gepa worker ended without reporting a result: the worker exited with code 1; stash-gepa-x.log: boom",
        ),
        (None, JobEnd(True), "the gepa worker ended without reporting a result"),
        ({"error": "the task model needs ANTHROPIC_API_KEY"}, JobEnd(False), "the task model needs ANTHROPIC_API_KEY"),
    ],
)
def test_a_worker_that_fails_or_reports_nothing_fails_the_run(
    sessions: Any,
    served: tuple[StandInLauncher, Dispatcher, Any],
    result: dict[str, Any] | None,
    end: JobEnd,
    error: str,
) -> None:
    launcher, dispatcher, stub = served
    run_id = _queued(sessions)
    if result is not None:
        launcher.worker = lambda job: stub.CompleteGepaJob(_completion(dispatcher, run_id, job, result), timeout=10)
    launcher.end = end
    assert dispatcher.run_claimed(run_id, _claimed(sessions, dispatcher, run_id)) is not None

    row = _settled(sessions, run_id)

    assert (row.status, row.error, row.result, row.progress["stage"]) == ("failed", error, None, "failed")


def test_a_result_whose_best_skill_is_not_a_candidate_fails_the_run(
    sessions: Any, served: tuple[StandInLauncher, Dispatcher, Any]
) -> None:
    _, dispatcher, stub = served
    run_id = _queued(sessions)
    job = JobLaunch("gepa", run_id, _claimed(sessions, dispatcher, run_id), "unused")
    broken = SUCCESS.model_dump(mode="json", exclude_none=True)
    broken["candidates"] = broken["candidates"][:1]

    stub.CompleteGepaJob(_completion(dispatcher, run_id, job, broken), timeout=10)

    row = _run(sessions, run_id)
    assert row.status == "failed"
    assert row.error.startswith("the worker's result.json is unusable: ")  # type: ignore[union-attr]
    assert "the best skill is not among the candidates" in row.error  # type: ignore[operator]


def test_a_completion_names_only_the_job_and_repeating_it_changes_nothing(
    sessions: Any, served: tuple[StandInLauncher, Dispatcher, Any]
) -> None:
    _, dispatcher, stub = served
    run_id = _queued(sessions)
    job = JobLaunch("gepa", run_id, _claimed(sessions, dispatcher, run_id), "unused")
    bare = gepa_pb2.CompleteGepaJobRequest(owner_id=OWNER, gepa_run_id=run_id, job_id=job.job_id)

    with pytest.raises(grpc.RpcError) as unstored:
        stub.CompleteGepaJob(bare, timeout=10)
    assert unstored.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert f"no result.json is stored at jobs/gepa/{job.job_id}/result.json" in unstored.value.details()
    assert _run(sessions, run_id).status == "running"

    first = stub.CompleteGepaJob(_completion(dispatcher, run_id, job, SUCCESS.model_dump(mode="json")), timeout=10)
    settled = _run(sessions, run_id)
    dispatcher.objects.delete(f"{job_key('gepa', job.job_id)}/{contract.RESULT_FILE}")  # as once the job ended
    again = stub.CompleteGepaJob(bare, timeout=10)

    assert first.gepa_run == again.gepa_run
    row = _run(sessions, run_id)
    assert (row.status, row.result, row.finished_at) == ("succeeded", settled.result, settled.finished_at)


def test_reports_from_a_superseded_launch_or_another_owner_are_refused(
    sessions: Any, served: tuple[StandInLauncher, Dispatcher, Any]
) -> None:
    _, dispatcher, stub = served
    run_id = _queued(sessions)
    job_id = _claimed(sessions, dispatcher, run_id)

    with pytest.raises(grpc.RpcError) as superseded:
        stub.ReportGepaProgress(
            gepa_pb2.ReportGepaProgressRequest(owner_id=OWNER, gepa_run_id=run_id, job_id="old", metric_calls_used=1),
            timeout=10,
        )
    with pytest.raises(grpc.RpcError) as foreign:
        stub.CompleteGepaJob(
            gepa_pb2.CompleteGepaJobRequest(owner_id="owner-b", gepa_run_id=run_id, job_id=job_id),
            timeout=10,
        )

    assert superseded.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert foreign.value.code() == grpc.StatusCode.NOT_FOUND
    assert _run(sessions, run_id).status == "running"


def test_the_sweep_fails_abandoned_claims_and_overdue_jobs_and_a_failed_run_can_be_retried(
    sessions: Any, tmp_path: Path
) -> None:
    dispatcher = _dispatcher(sessions, tmp_path, StandInLauncher())
    abandoned, overdue, fresh = _queued(sessions), _queued(sessions), _queued(sessions)
    for run_id in (abandoned, overdue, fresh):
        _claimed(sessions, dispatcher, run_id)
    with transaction(sessions) as session:
        session.get(store.GepaRunRow, abandoned).claimed_at = utc_now() - timedelta(minutes=11)
        session.get(store.GepaRunRow, overdue).started_at = utc_now() - timedelta(hours=2)

    failed = dispatcher.sweep()

    assert sorted(failed) == sorted([abandoned, overdue])
    assert _run(sessions, abandoned).error == "the job was interrupted before it started (over 10 minutes); retry"
    assert _run(sessions, overdue).error == "the job did not finish within 60 minutes; retry"
    assert _run(sessions, fresh).status == "running"
    with transaction(sessions) as session:
        retried = store.retry(session, OWNER, abandoned)
        assert (retried.status, retried.error, retried.job_id, retried.result) == ("queued", None, None, None)


def test_a_cluster_gepa_run_is_a_kubernetes_job_the_sweep_deletes_when_it_abandons_the_run(
    sessions: Any, tmp_path: Path
) -> None:
    settings = KubernetesJobSettings(namespace="stash", relist_interval_s=2, watch_timeout_s=1)
    with emulated_kubernetes() as kube:
        launcher = KubernetesLauncher(settings, kube.api_client)
        dispatcher = _dispatcher(sessions, tmp_path, launcher)
        run_id = _queued(sessions)
        job_id = _claimed(sessions, dispatcher, run_id)
        launched = dispatcher.run_claimed(run_id, job_id)
        assert launched is not None
        job = kube.batch.read_namespaced_job(launched.name, "stash")
        with transaction(sessions) as session:
            session.get(store.GepaRunRow, run_id).started_at = utc_now() - timedelta(hours=2)

        failed = dispatcher.sweep()
        remaining = kube.batch.list_namespaced_job("stash").items
        dispatcher.stop()
        launcher.stop()

    assert (job.metadata.labels["stash.rm/run-id"], job.metadata.labels["stash.rm/kind"]) == (run_id, "gepa")
    assert "nvidia.com/gpu" not in job.spec.template.spec.containers[0].resources.limits
    assert failed == [run_id] and remaining == []
    assert _run(sessions, run_id).error == "the job did not finish within 60 minutes; retry"


# --- dead workers and dead replicas: leases ---------------------------------------------------------------

LEASE_S = 1.5  # short, so that a replica that died is noticed within a test's patience


def _leasing_dispatcher(sessions: Any, tmp_path: Path, launcher: Any) -> Dispatcher:
    settings = JobSettings("127.0.0.1:1", lease_s=LEASE_S)
    objects = LocalObjectStore(tmp_path / "artifacts", "http://127.0.0.1:1", b"k" * 32)
    return Dispatcher(sessions, Models(), Traces(), objects, launcher, InProcessWakeups(), settings)


def _sleeping_workers(tmp_path: Path) -> LocalSubprocessLauncher:
    """Real worker processes that are alive but slow: each writes its pid under tmp_path/pids and never ends."""
    (tmp_path / "pids").mkdir(exist_ok=True)
    env = {PID_VARIABLE: str(tmp_path / "pids"), "PYTHONPATH": str(Path(support.__file__).parents[1])}
    return LocalSubprocessLauncher(tmp_path / "logs", env, "support.sleeping_worker")


def test_a_worker_killed_with_sigkill_fails_its_run_within_seconds_with_how_it_ended(
    sessions: Any, tmp_path: Path
) -> None:
    dispatcher = _leasing_dispatcher(sessions, tmp_path, _sleeping_workers(tmp_path))
    run_id = _queued(sessions)
    assert dispatcher.drain() == 1
    job_id = _run(sessions, run_id).job_id
    pid = worker_pid(tmp_path / "pids", job_id)

    os.kill(pid, signal.SIGKILL)
    killed_at = time.monotonic()
    row = _settled(sessions, run_id)
    settled_s = time.monotonic() - killed_at

    assert row.status == "failed"
    assert row.error.startswith("the gepa worker ended without reporting a result: the worker exited with code -9")
    assert settled_s < 5.0


def test_a_slow_worker_keeps_its_lease_while_a_dead_replicas_claim_is_taken_over_within_seconds(
    sessions: Any, tmp_path: Path
) -> None:
    """One replica watches a live worker for longer than a lease; another replica's claim is abandoned."""
    alive = _leasing_dispatcher(sessions, tmp_path, _sleeping_workers(tmp_path))
    slow, abandoned = _queued(sessions), _queued(sessions)
    with transaction(sessions) as session:
        abandoned_job = store.claim(session, abandoned)  # as a replica that died right after claiming would leave it
        session.get(store.GepaRunRow, abandoned).lease_until = utc_now() + timedelta(seconds=LEASE_S)
    alive.start()
    alive.wake()
    slow_job = wait_until(lambda: _run(sessions, slow).job_id, what="the slow run's claim")
    pid = worker_pid(tmp_path / "pids", slow_job)
    survivor = _leasing_dispatcher(sessions, tmp_path, StandInLauncher())
    survivor.leases.start()

    failed = wait_until(lambda: _run(sessions, abandoned).status == "failed", what="the takeover")
    slow_row = _run(sessions, slow)
    survivor.leases.stop()
    alive.stop()

    assert failed and abandoned_job is not None
    reason = "the gepa service that claimed this GEPA run stopped before its job started; retry"
    assert _run(sessions, abandoned).error == reason
    assert (slow_row.status, slow_row.job_id) == ("running", slow_job)
    assert slow_row.lease_until is not None and slow_row.lease_until > utc_now()
    assert not is_alive(pid)  # stopping its replica stopped it


def test_a_dead_replicas_kubernetes_job_is_adopted_by_a_live_one_and_its_failed_pod_fails_the_run(
    sessions: Any, tmp_path: Path
) -> None:
    settings = KubernetesJobSettings(namespace="stash", relist_interval_s=2, watch_timeout_s=1)
    with emulated_kubernetes() as kube:
        first = KubernetesLauncher(settings, kube.api_client)
        departed = _leasing_dispatcher(sessions, tmp_path, first)
        run_id = _queued(sessions)
        assert departed.drain() == 1  # claimed and launched; its replica then renews nothing
        name = f"stash-gepa-{_run(sessions, run_id).job_id}"
        second = KubernetesLauncher(settings, kube.api_client)
        survivor = _leasing_dispatcher(sessions, tmp_path, second)
        survivor.leases.start()
        wait_until(lambda: survivor.leases.held() == [run_id], what="the adoption")
        still_running = _run(sessions, run_id).status
        condition = {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "pod failed"}
        kube.set_job_status("stash", name, {"conditions": [condition]})
        row = _settled(sessions, run_id)
        survivor.leases.stop()
        first.stop()
        second.stop()

    assert still_running == "running"
    assert row.status == "failed"
    assert row.error == (
        f"the gepa worker ended without reporting a result: the Kubernetes Job {name} failed: "
        "BackoffLimitExceeded: pod failed"
    )
