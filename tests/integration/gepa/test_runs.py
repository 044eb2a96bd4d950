"""The GEPA run lifecycle on PostgreSQL: claims, preparing the job directory, recording results, the sweep.

The peers are in-memory sources and the launcher writes the worker's result itself, so each rule of
the dispatcher is tested on its own; the real worker runs in tests/e2e/test_rest_gepa.py.
"""

import json
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from stash_common.coordination import InProcessWakeups
from stash_common.db import make_engine, make_sessions, transaction, upgrade, utc_now
from stash_common.errors import NotFound
from stash_common.steps import TraceStep
from stash_gepa import job_contract as contract
from stash_gepa import store
from stash_gepa.examples import ExampleTrace, Finding
from stash_gepa.runs import Dispatcher, JobSettings, RewardModelInfo

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

    def reward_model(self, owner_id: str, model_id: str) -> RewardModelInfo:
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
class Finished:
    """A worker that has already ended, having written `result`."""

    job_dir: Path

    def poll(self) -> int | None:
        return 0

    def wait(self, timeout_s: float) -> int | None:
        return 0

    def kill(self) -> None:
        pass


@dataclass
class WritingLauncher:
    """Launches nothing: writes the result a worker would have written (or none)."""

    result: contract.GepaResult | None
    launched: list[Path] = field(default_factory=list)

    def launch(self, job_dir: Path) -> Finished:
        self.launched.append(job_dir)
        if self.result is not None:
            contract.write_result(job_dir, self.result)
        return Finished(job_dir)


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
    settings = JobSettings(artifact_dir=tmp_path, submit_timeout=timedelta(minutes=10), job_timeout=timedelta(hours=1))
    return Dispatcher(sessions, models or Models(), Traces(**traces), launcher, InProcessWakeups(), settings)


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
    with transaction(sessions) as session:
        row = session.get(store.GepaRunRow, run_id)
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


def test_a_run_is_claimed_once_and_its_job_directory_holds_the_contract(sessions: Any, tmp_path: Path) -> None:
    dispatcher = _dispatcher(sessions, tmp_path, WritingLauncher(None), deleted={"t4"})
    run_id = _queued(sessions)
    job_id = _claimed(sessions, dispatcher, run_id)
    with transaction(sessions) as session:
        assert store.claim(session, run_id) is None

    job_dir = dispatcher.prepare(run_id, job_id)

    job = contract.read_job(job_dir)
    examples = contract.read_examples(job_dir)
    assert (job.kind, job.reward_model_key, job.task_model, job.task_api_base) == (
        "gepa",
        "reward-models/a/m.tar.gz",
        "openai/task",
        "http://vllm:8000/v1",
    )
    assert (job.reflection_model, job.max_metric_calls, job.job_id) == ("openai/reflect", 40, job_id)
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
    dispatcher = _dispatcher(sessions, tmp_path, WritingLauncher(None))
    run_id = _queued(sessions, max_metric_calls=5)

    dispatcher.prepare(run_id, _claimed(sessions, dispatcher, run_id))

    assert _run(sessions, run_id).budget_warning.startswith("max_metric_calls 5 is below 13")  # type: ignore[union-attr]


def test_a_model_retried_since_the_request_fails_the_run_with_the_reason(sessions: Any, tmp_path: Path) -> None:
    launcher = WritingLauncher(SUCCESS)
    dispatcher = _dispatcher(sessions, tmp_path, launcher, Models(status="queued"))
    run_id = _queued(sessions)

    assert dispatcher.run_claimed(run_id, _claimed(sessions, dispatcher, run_id)) is None

    row = _run(sessions, run_id)
    assert (row.status, launcher.launched) == ("failed", [])
    assert row.error == "reward model m1 is queued: GEPA needs a succeeded model as its metric"


def test_no_trace_with_input_before_the_first_assistant_step_fails_the_run(sessions: Any, tmp_path: Path) -> None:
    models = Models(trace_ids=("t1", "t2"))
    dispatcher = _dispatcher(sessions, tmp_path, WritingLauncher(SUCCESS), models, opening_with_assistant={"t1", "t2"})
    run_id = _queued(sessions)

    dispatcher.run_claimed(run_id, _claimed(sessions, dispatcher, run_id))

    row = _run(sessions, run_id)
    assert row.status == "failed"
    assert row.error.startswith("none of the reward model's 2 selected traces has input")  # type: ignore[union-attr]


def test_a_worker_result_becomes_the_runs_result_and_its_directory_goes(sessions: Any, tmp_path: Path) -> None:
    dispatcher = _dispatcher(sessions, tmp_path, WritingLauncher(SUCCESS))
    run_id = _queued(sessions)
    job_id = _claimed(sessions, dispatcher, run_id)
    running = dispatcher.run_claimed(run_id, job_id)
    assert running is not None

    row = _settled(sessions, run_id)

    assert (row.status, row.error, row.progress["metric_calls_used"]) == ("succeeded", None, 40)
    assert row.result is not None and row.result["best_skill"] == SKILL and row.result["seed_score"] == 0.4
    assert not running.job_dir.exists()


@pytest.mark.parametrize(
    ("written", "error"),
    [
        (None, "the GEPA worker ended without a result.json; see its worker.log"),
        (contract.GepaResult(error="the task model needs ANTHROPIC_API_KEY"), "the task model needs ANTHROPIC_API_KEY"),
    ],
)
def test_a_worker_that_fails_or_writes_nothing_fails_the_run(
    sessions: Any, tmp_path: Path, written: contract.GepaResult | None, error: str
) -> None:
    dispatcher = _dispatcher(sessions, tmp_path, WritingLauncher(written))
    run_id = _queued(sessions)
    job_id = _claimed(sessions, dispatcher, run_id)
    assert dispatcher.run_claimed(run_id, job_id) is not None

    row = _settled(sessions, run_id)

    assert (row.status, row.error, row.result) == ("failed", error, None)


def test_a_result_whose_best_skill_is_not_a_candidate_is_refused(sessions: Any, tmp_path: Path) -> None:
    dispatcher = _dispatcher(sessions, tmp_path, WritingLauncher(None))
    run_id = _queued(sessions)
    job_id = _claimed(sessions, dispatcher, run_id)
    job_dir = dispatcher.prepare(run_id, job_id)
    broken = SUCCESS.model_dump(mode="json")
    broken["candidates"] = broken["candidates"][:1]
    (job_dir / contract.RESULT_FILE).write_text(json.dumps(broken))

    dispatcher.finish(run_id, job_id, job_dir)

    row = _run(sessions, run_id)
    assert row.status == "failed"
    assert row.error.startswith("the worker's result.json is unusable: ")  # type: ignore[union-attr]
    assert "the best skill is not among the candidates" in row.error  # type: ignore[operator]


def test_the_sweep_fails_abandoned_claims_and_overdue_jobs_and_a_failed_run_can_be_retried(
    sessions: Any, tmp_path: Path
) -> None:
    dispatcher = _dispatcher(sessions, tmp_path, WritingLauncher(None))
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
