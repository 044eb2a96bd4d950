"""Scoring end to end over real gRPC on PostgreSQL: requests, the dispatcher's batches, the worker's reports
(a stand-in worker reporting fixed scores), validation, retries, background scoring and owner isolation."""

import math
import os
import signal
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import grpc
import orjson
import pytest
from sqlalchemy import func, select

from stash.rm.v1 import common_pb2, ingest_pb2, scorer_pb2
from stash_common.db import new_id, transaction, utc_now
from stash_common.jobs.kubernetes import KubernetesJobSettings, KubernetesLauncher
from stash_common.jobs.transfer import job_key
from stash_common.redis_wakeups import RedisWakeups
from stash_scorer import store
from support.ingest import OTHER_OWNER, OWNER, import_payload, stash_line
from support.kubernetes_api import emulated_kubernetes
from support.scorer import RunningScorer, Wired, finished_run, wait_until
from support.scoring_worker import MODE_VARIABLE, RELEASE_FILE

SUCCEEDED, FAILED = common_pb2.JOB_STATUS_SUCCEEDED, common_pb2.JOB_STATUS_FAILED


def _import(wired: Wired, external_id: str, owner: str = OWNER, **fields: Any) -> str:
    return import_payload(wired.ingest, stash_line(external_id, **fields), owner=owner).trace_ids[0]


def _actions(wired: Wired, trace_id: str, owner: str = OWNER) -> list[Any]:
    trace = wired.ingest.GetTrace(ingest_pb2.GetTraceRequest(owner_id=owner, trace_id=trace_id), timeout=30).trace
    return [step for step in trace.steps if step.role == common_pb2.STEP_ROLE_ASSISTANT]


def _score(scorer: RunningScorer, trace_id: str, model_id: str, owner: str = OWNER) -> Any:
    request = scorer_pb2.ScoreTraceRequest(owner_id=owner, trace_id=trace_id, reward_model_id=model_id)
    return scorer.stub.ScoreTrace(request, timeout=30).scoring_run


def _action_scores(scorer: RunningScorer, trace_id: str, owner: str = OWNER) -> list[Any]:
    request = scorer_pb2.ListActionScoresRequest(owner_id=owner, trace_id=trace_id)
    return list(scorer.stub.ListActionScores(request, timeout=30).action_scores)


def _runs(scorer: RunningScorer, trace_id: str, owner: str = OWNER) -> list[Any]:
    request = scorer_pb2.ListScoringRunsRequest(owner_id=owner, trace_id=trace_id)
    return list(scorer.stub.ListScoringRuns(request, timeout=30).scoring_runs)


def _jobs(scorer: RunningScorer) -> list[store.ScoringJobRow]:
    with transaction(scorer.sessions) as session:
        return list(session.scalars(select(store.ScoringJobRow).order_by(store.ScoringJobRow.created_at)))


def _run_row(scorer: RunningScorer, run_id: str) -> store.ScoringRunRow:
    with transaction(scorer.sessions) as session:
        row = session.get(store.ScoringRunRow, run_id)
        assert row is not None
        return row


# One selected trace of a training job: its id, the revision the trainer read, its score and its actions' scores.
Trained = tuple[str, int, float, list[tuple[str, float, float]]]


def _store_training_job(scorer: RunningScorer, model_id: str, traces: list[Trained], owner: str = OWNER) -> str:
    """A finished training job's files as the trainer and its worker leave them in object storage; their key."""
    key = job_key("trainer", new_id())
    revisions = {trace_id: revision for trace_id, revision, _, _ in traces}
    job = {"kind": "train", "owner_id": owner, "reward_model_id": model_id, "trace_revisions": revisions}
    scores = [{"trace_id": trace_id, "score": score} for trace_id, _, score, _ in traces]
    actions = [
        {"trace_id": trace_id, "step_id": step_id, "score": score, "credit": credit}
        for trace_id, _, _, steps in traces
        for step_id, score, credit in steps
    ]
    scorer.objects.put(f"{key}/job.json", orjson.dumps(job))
    scorer.objects.put(f"{key}/scores.jsonl", b"".join(orjson.dumps(row) + b"\n" for row in scores))
    scorer.objects.put(f"{key}/action_scores.jsonl", b"".join(orjson.dumps(row) + b"\n" for row in actions))
    return key


def _publish(scorer: RunningScorer, model_id: str, traces: list[Trained], key: str | None = None) -> Any:
    """Have the scorer publish a training job's scores, reading them by the job's key."""
    key = key or _store_training_job(scorer, model_id, traces)
    request = scorer_pb2.PublishTrainingScoresRequest(owner_id=OWNER, reward_model_id=model_id, job_key=key)
    return scorer.stub.PublishTrainingScores(request, timeout=30)


def _ready(scorer: RunningScorer, model_id: str) -> None:
    """Make the model ready through PublishTrainingScores and wait until its backfill ran."""
    _publish(scorer, model_id, [])

    def backfilled() -> bool:
        with transaction(scorer.sessions) as session:
            row = session.get(store.ScoringModelRow, model_id)
            return row is not None and row.backfilled_at is not None

    wait_until(backfilled, what="the backfill")


@pytest.mark.parametrize(
    ("database_url", "wakeups"), [("sqlite", "in-process"), ("postgresql", "redis")], indirect=["database_url"]
)
def test_a_scored_trace_publishes_every_action_and_a_second_request_reuses_the_scores(
    wired: Wired, wakeups: str, request: pytest.FixtureRequest
) -> None:
    # The embedded profile: SQLite and wake-ups within the process; the cluster one: PostgreSQL and Redis streams.
    scorer = wired.scorer(wakeups=RedisWakeups(request.getfixturevalue("redis_url")) if wakeups == "redis" else None)
    model_id = wired.trainer.add_model(OWNER)
    trace_id = _import(wired, "refund")

    requested = _score(scorer, trace_id, model_id)
    done = finished_run(scorer.stub, OWNER, requested.id)

    assert requested.status in (common_pb2.JOB_STATUS_QUEUED, common_pb2.JOB_STATUS_RUNNING)
    assert (done.status, done.trace_revision, done.HasField("error")) == (SUCCEEDED, 1, False)
    actions = _actions(wired, trace_id)
    scores = _action_scores(scorer, trace_id)
    assert [(score.step_id, score.step_index) for score in scores] == [(step.id, step.index) for step in actions]
    assert [step.index for step in actions] == [2, 4]  # the tool call and the answer; not the tool result
    assert [score.score for score in scores] == [0.5, 1.0]
    assert [score.credit for score in scores] == [pytest.approx(math.tanh(0.25)), pytest.approx(math.tanh(0.5))]
    assert {(score.reward_model_id, score.reward_model_name, score.trace_id) for score in scores} == {
        (model_id, "refunds", trace_id)
    }
    listed = scorer.stub.ListTraceScores(scorer_pb2.ListTraceScoresRequest(owner_id=OWNER, trace_id=trace_id))
    assert [(score.reward_model_id, score.score) for score in listed.scores] == [(model_id, 1.5)]
    latest = scorer.stub.BatchGetLatestScores(
        scorer_pb2.BatchGetLatestScoresRequest(owner_id=OWNER, trace_ids=[trace_id, "unscored"])
    ).latest_scores
    assert dict(latest) == {
        trace_id: common_pb2.LatestScore(reward_model_id=model_id, reward_model_name="refunds", score=1.5)
    }

    again = _score(scorer, trace_id, model_id)

    assert (again.id, again.status) == (requested.id, SUCCEEDED)
    assert [job.run_count for job in _jobs(scorer)] == [1]
    assert [run.id for run in _runs(scorer, trace_id)] == [requested.id]


def test_a_repeated_report_of_a_scored_trace_changes_nothing(wired: Wired) -> None:
    scorer = wired.scorer()
    model_id = wired.trainer.add_model(OWNER)
    trace_id = _import(wired, "refund")
    done = finished_run(scorer.stub, OWNER, _score(scorer, trace_id, model_id).id)
    scores = _action_scores(scorer, trace_id)
    repeated = scorer_pb2.ReportScoringResultRequest(
        owner_id=OWNER,
        scoring_run_id=done.id,
        job_id=_run_row(scorer, done.id).job_id,
        trace_id=trace_id,
        trace_revision=1,
        status=common_pb2.JOB_STATUS_FAILED,
        error="a different answer the second time",
    )

    again = scorer.stub.ReportScoringResult(repeated, timeout=30).scoring_run

    assert (again.id, again.status, again.HasField("error")) == (done.id, SUCCEEDED, False)
    assert _action_scores(scorer, trace_id) == scores
    with pytest.raises(grpc.RpcError) as refused:
        scorer.stub.ReportScoringResult(
            scorer_pb2.ReportScoringResultRequest(
                owner_id=OWNER, scoring_run_id=done.id, job_id="another-job", status=common_pb2.JOB_STATUS_FAILED
            ),
            timeout=30,
        )
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_two_simultaneous_requests_meet_at_one_run(wired: Wired) -> None:
    scorer = wired.scorer(start_dispatcher=False)
    model_id = wired.trainer.add_model(OWNER)
    trace_id = _import(wired, "refund")
    barrier = threading.Barrier(2)
    runs: list[Any] = []

    def request() -> None:
        barrier.wait()
        runs.append(_score(scorer, trace_id, model_id))

    threads = [threading.Thread(target=request) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(runs) == 2 and runs[0].id == runs[1].id
    with transaction(scorer.sessions) as session:
        assert session.scalar(select(func.count()).select_from(store.ScoringRunRow)) == 1


def test_a_trace_that_changes_while_it_is_scored_fails_its_run_and_publishes_nothing(
    wired: Wired, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MODE_VARIABLE, "hold")
    scorer = wired.scorer()
    model_id = wired.trainer.add_model(OWNER)
    line = orjson.loads(stash_line("refund"))
    trace_id = import_payload(wired.ingest, orjson.dumps(line).decode()).trace_ids[0]
    run = _score(scorer, trace_id, model_id)
    job = wait_until(lambda: _jobs(scorer), what="the job")[0]
    key = job_key("scorer", job.id)
    wait_until(lambda: scorer.objects.exists(f"{key}/job.json"), what="the job's uploaded files")

    grown = {**line, "steps": [*line["steps"], {"role": "user", "content": "Thanks, that works!"}]}
    import_payload(wired.ingest, orjson.dumps(grown).decode())
    scorer.objects.put(f"{key}/{RELEASE_FILE}", b"")
    done = finished_run(scorer.stub, OWNER, run.id)

    assert done.status == FAILED
    assert f"trace {trace_id} changed while it was being scored" in done.error
    assert "nothing was published" in done.error
    assert _action_scores(scorer, trace_id) == []


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("nan", "action_scores[0].score: must be a finite number, not nan"),
        ("unknown_step", "action_scores[0].step_id: step no-such-step is not an assistant response or tool call"),
        ("credit", "action_scores[0].credit: must be within -1..+1, not 1.5"),
    ],
)
def test_a_result_that_fails_validation_fails_its_run_and_publishes_nothing(
    wired: Wired, monkeypatch: pytest.MonkeyPatch, mode: str, reason: str
) -> None:
    monkeypatch.setenv(MODE_VARIABLE, mode)
    scorer = wired.scorer(max_attempts=1)
    model_id = wired.trainer.add_model(OWNER)
    trace_id = _import(wired, "refund")

    done = finished_run(scorer.stub, OWNER, _score(scorer, trace_id, model_id).id)

    assert done.status == FAILED
    assert done.error.startswith("the scoring worker's result was refused: ")
    assert reason in done.error
    assert _action_scores(scorer, trace_id) == []


def test_a_worker_that_exits_without_reporting_fails_its_runs(wired: Wired, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MODE_VARIABLE, "exit")
    scorer = wired.scorer(max_attempts=1)
    model_id = wired.trainer.add_model(OWNER)
    first, second = _import(wired, "first"), _import(wired, "second")

    runs = [finished_run(scorer.stub, OWNER, _score(scorer, trace_id, model_id).id) for trace_id in (first, second)]

    for run in runs:
        assert run.status == FAILED
        reason, _, log_line = run.error.partition("; ")
        assert reason == "the scoring worker ended before reporting this trace: the worker exited with code 3"
        assert log_line.endswith(".log: the fake worker exits before reporting, on purpose")
    assert all(job.status == "failed" and job.exit_code == 3 for job in _jobs(scorer))


def test_a_cluster_scorer_runs_a_kubernetes_job_whose_oom_kill_fails_its_runs(wired: Wired) -> None:
    settings = KubernetesJobSettings(namespace="stash", relist_interval_s=2, watch_timeout_s=1)
    with emulated_kubernetes() as kube:
        launcher = KubernetesLauncher(settings, kube.api_client)
        scorer = wired.scorer(max_attempts=1, launcher=launcher)
        model_id = wired.trainer.add_model(OWNER)
        run = _score(scorer, _import(wired, "refund"), model_id)
        job = wait_until(lambda: _jobs(scorer), what="the job")[0]
        name = f"stash-score-{job.id}"
        wait_until(lambda: kube.batch.list_namespaced_job("stash").items, what="the Kubernetes Job")
        command = kube.batch.read_namespaced_job(name, "stash").spec.template.spec.containers[0].command
        kube.add_pod("stash", name, {"terminated": {"exitCode": 137, "reason": "OOMKilled"}})
        failed = {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached"}
        kube.set_job_status("stash", name, {"conditions": [failed]})
        done = finished_run(scorer.stub, OWNER, run.id)
        launcher.stop()

    assert command == ["python", "-m", "stash_common.jobs.worker", "score", "--job", f"jobs/scorer/{job.id}"]
    assert done.status == FAILED
    assert done.error.startswith(
        f"the scoring worker ended before reporting this trace: the Kubernetes Job {name} failed: OOMKilled: "
    )
    assert [job.exit_code for job in _jobs(scorer)] == [137]


def test_failed_runs_are_retried_up_to_the_attempts_cap_and_an_explicit_request_still_retries(
    wired: Wired, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MODE_VARIABLE, "fail")
    scorer = wired.scorer(max_attempts=3)
    model_id = wired.trainer.add_model(OWNER)
    trace_id = _import(wired, "refund")
    run = _score(scorer, trace_id, model_id)

    wait_until(lambda: _run_row(scorer, run.id).attempts == 3 and _run_row(scorer, run.id).status == "failed")
    time.sleep(1.0)  # five more sweeps: none may retry it again

    row = _run_row(scorer, run.id)
    assert (row.status, row.attempts, row.error) == ("failed", 3, "the fake worker failed on purpose")
    assert len(_jobs(scorer)) == 3
    retried = _score(scorer, trace_id, model_id)
    assert retried.id != run.id and retried.status in (common_pb2.JOB_STATUS_QUEUED, common_pb2.JOB_STATUS_RUNNING)


@pytest.mark.parametrize("database_url", ["sqlite", "postgresql"], indirect=True)
def test_a_burst_of_imports_is_scored_in_one_batch_once_its_owner_is_idle(wired: Wired) -> None:
    scorer = wired.scorer(debounce_s=1.0)
    model_id = wired.trainer.add_model(OWNER)
    _ready(scorer, model_id)

    trace_ids = [_import(wired, f"burst-{number}") for number in range(5)]

    wait_until(lambda: all(_action_scores(scorer, trace_id) for trace_id in trace_ids), what="scores of the burst")
    jobs = wait_until(lambda: [job for job in _jobs(scorer) if job.status != "running"], what="the job to end")
    assert [(job.run_count, job.status) for job in jobs] == [(5, "succeeded")]
    with transaction(scorer.sessions) as session:
        runs = list(session.scalars(select(store.ScoringRunRow)))
    assert sorted(run.trace_id for run in runs) == sorted(trace_ids)
    assert {(run.job_id, run.explicit, run.status) for run in runs} == {(jobs[0].id, False, "succeeded")}


def test_an_owner_who_never_pauses_is_due_once_a_change_has_waited_ten_debounces(wired: Wired) -> None:
    scorer = wired.scorer(start_dispatcher=False, debounce_s=30.0)
    now = utc_now()
    with transaction(scorer.sessions) as session:
        # OWNER's trace changed a second ago (not idle) but first waited 301 s ago; OTHER_OWNER's only 60 s ago.
        session.add(
            store.PendingChangeRow(
                trace_id="t-busy",
                owner_id=OWNER,
                revision=9,
                seen_at=now - timedelta(seconds=1),
                first_seen_at=now - timedelta(seconds=301),
            )
        )
        session.add(
            store.PendingChangeRow(
                trace_id="t-new",
                owner_id=OTHER_OWNER,
                revision=1,
                seen_at=now - timedelta(seconds=1),
                first_seen_at=now - timedelta(seconds=60),
            )
        )
    idle_since, waiting_since = scorer.background._due_times()
    with transaction(scorer.sessions) as session:
        due = store.due_changes(session, idle_since, waiting_since)
    assert [(row.owner_id, row.trace_id) for row in due] == [(OWNER, "t-busy")]


def test_explicit_requests_are_served_first_within_their_checkpoints_batch(wired: Wired) -> None:
    scorer = wired.scorer(start_dispatcher=False, batch_traces=2, max_active_batches=2)
    background_model = wired.trainer.add_model(OWNER, name="background")
    other_model = wired.trainer.add_model(OWNER, name="other")
    first, second, third, fourth = (_import(wired, f"trace-{number}") for number in range(4))
    _publish(scorer, background_model, [])
    assert scorer.background.backfill() == 4  # four automatic runs, oldest first

    upgraded = _score(scorer, fourth, background_model)
    requested = _score(scorer, third, other_model)

    batches = [scorer.dispatcher.claim() for _ in range(3)]
    assert batches[2] is None  # both slots are taken
    assert batches[0] is not None and batches[1] is not None
    assert batches[0].reward_model_id == background_model
    assert [(run.trace_id, run.explicit) for run in batches[0].runs] == [(fourth, True), (first, False)]
    assert batches[0].runs[0].id == upgraded.id  # the queued automatic run, now explicit
    assert [(run.id, run.trace_id) for run in batches[1].runs] == [(requested.id, third)]
    assert second not in {run.trace_id for batch in batches[:2] if batch for run in batch.runs}


def test_owners_reach_only_their_own_traces_models_and_runs(wired: Wired) -> None:
    scorer = wired.scorer(start_dispatcher=False)
    mine, theirs = wired.trainer.add_model(OWNER), wired.trainer.add_model(OTHER_OWNER)
    my_trace, their_trace = _import(wired, "mine"), _import(wired, "theirs", owner=OTHER_OWNER)

    for trace_id, model_id in ((my_trace, theirs), (their_trace, mine)):
        with pytest.raises(grpc.RpcError) as refused:
            _score(scorer, trace_id, model_id, owner=OTHER_OWNER)
        assert refused.value.code() == grpc.StatusCode.NOT_FOUND
    run = _score(scorer, my_trace, mine)
    with pytest.raises(grpc.RpcError) as hidden:
        scorer.stub.GetScoringRun(scorer_pb2.GetScoringRunRequest(owner_id=OTHER_OWNER, scoring_run_id=run.id))

    assert hidden.value.code() == grpc.StatusCode.NOT_FOUND
    assert _runs(scorer, my_trace, owner=OTHER_OWNER) == []
    assert [listed.id for listed in _runs(scorer, my_trace)] == [run.id]


def test_a_request_names_why_a_trace_or_model_cannot_be_scored(wired: Wired) -> None:
    scorer = wired.scorer(start_dispatcher=False)
    trace_id = _import(wired, "refund")
    silent = import_payload(wired.ingest, orjson.dumps({"steps": [{"role": "user", "content": "hello?"}]}).decode())
    cases = [
        (
            trace_id,
            wired.trainer.add_model(OWNER, action_scoring_version=None),
            "INVALID_ARGUMENT",
            "action_scoring_version",
        ),
        (trace_id, wired.trainer.add_model(OWNER, status="running"), "FAILED_PRECONDITION", "only a succeeded model"),
        (silent.trace_ids[0], wired.trainer.add_model(OWNER), "INVALID_ARGUMENT", "no assistant response or tool call"),
    ]

    for trace, model_id, code, reason in cases:
        with pytest.raises(grpc.RpcError) as refused:
            _score(scorer, trace, model_id)
        assert (refused.value.code().name, reason in refused.value.details()) == (code, True)


def test_a_succeeded_models_training_scores_are_published_and_its_other_traces_scored(wired: Wired) -> None:
    scorer = wired.scorer()
    model_id = wired.trainer.add_model(OWNER)
    trained, unknown_step, stale, untrained = (_import(wired, name) for name in ("a", "b", "c", "d"))
    line = orjson.loads(stash_line("c"))
    grown = {**line, "steps": [*line["steps"], {"role": "user", "content": "Thanks!"}]}
    import_payload(wired.ingest, orjson.dumps(grown).decode())  # c is at revision 2 now

    def scores(trace_id: str, step_ids: list[str] | None = None) -> Trained:
        ids = step_ids or [step.id for step in _actions(wired, trace_id)]
        return trace_id, 1, 0.7, [(step_id, 0.1, 0.2) for step_id in ids]

    key = _store_training_job(scorer, model_id, [scores(trained), scores(unknown_step, ["elsewhere"]), scores(stale)])
    published = _publish(scorer, model_id, [], key)

    assert (published.published_traces, published.rejected_traces) == (1, 2)
    training_run = _runs(scorer, trained)[0]
    assert training_run.status == SUCCEEDED
    assert [(score.score, score.credit) for score in _action_scores(scorer, trained)] == [(0.1, 0.2), (0.1, 0.2)]
    for trace_id, reason in ((unknown_step, "step elsewhere is not"), (stale, "is at revision 2, not 1")):
        with transaction(scorer.sessions) as session:
            query = select(store.ScoringRunRow).where(store.ScoringRunRow.trace_id == trace_id)
            rejected = [run for run in session.scalars(query) if run.status == "failed"]
        assert [(run.trace_revision, run.permanent) for run in rejected] == [(1, True)]
        assert rejected[0].error.startswith("the training job's scores were refused: ")
        assert reason in rejected[0].error
    # The model is ready: every other trace, and the rejected ones at their current revision, are scored.
    for trace_id in (untrained, unknown_step, stale):
        wait_until(lambda trace_id=trace_id: _action_scores(scorer, trace_id), what=f"background scores of {trace_id}")
    assert [run.id for run in _runs(scorer, trained)] == [training_run.id]  # never scored again
    # Publishing the same job again (the trainer repeats itself after an outage) changes nothing.
    again = _publish(scorer, model_id, [], key)
    assert again.published_traces == 1
    assert [run.id for run in _runs(scorer, trained)] == [training_run.id]


@pytest.mark.parametrize("ingest_settle", [timedelta(minutes=5)], ids=["settle-5min"])
def test_a_ready_models_backfill_scores_traces_changed_inside_ingests_settle_window(wired: Wired) -> None:
    # The sweep's cursor lists no change younger than five minutes; a backfill keeps no cursor and lists them.
    scorer = wired.scorer()
    model_id = wired.trainer.add_model(OWNER)
    trace_id = _import(wired, "fresh")

    _ready(scorer, model_id)

    wait_until(lambda: _action_scores(scorer, trace_id), what="the backfill's scores of a fresh trace")


def test_a_training_job_is_published_only_for_its_own_model(wired: Wired) -> None:
    scorer = wired.scorer(start_dispatcher=False)
    model_id, other_model = wired.trainer.add_model(OWNER), wired.trainer.add_model(OWNER, name="other")
    other_job = _store_training_job(scorer, other_model, [])

    for key, reason in (
        (other_job, f"{other_job} is not the training job of reward model {model_id}"),
        ("jobs/scorer/job-1", "job_key: must be a training job's key, jobs/trainer/<job id>"),
    ):
        with pytest.raises(grpc.RpcError) as refused:
            _publish(scorer, model_id, [], key)
        assert (refused.value.code(), reason in refused.value.details()) == (grpc.StatusCode.INVALID_ARGUMENT, True)


def test_a_training_job_whose_files_are_gone_still_makes_the_model_ready(wired: Wired) -> None:
    scorer = wired.scorer(start_dispatcher=False)
    model_id = wired.trainer.add_model(OWNER)

    published = _publish(scorer, model_id, [], job_key("trainer", "deleted-job"))

    assert (published.published_traces, published.rejected_traces) == (0, 0)
    with transaction(scorer.sessions) as session:
        assert session.get(store.ScoringModelRow, model_id) is not None


def test_reimports_and_deletions_take_their_scores_with_them(wired: Wired, monkeypatch: pytest.MonkeyPatch) -> None:
    scorer = wired.scorer(max_attempts=1)
    model_id = wired.trainer.add_model(OWNER)
    kept, deleted = _import(wired, "kept"), _import(wired, "deleted")
    for trace_id in (kept, deleted):
        assert finished_run(scorer.stub, OWNER, _score(scorer, trace_id, model_id).id).status == SUCCEEDED
    monkeypatch.setenv(MODE_VARIABLE, "exit")  # the new revision's run publishes nothing

    replaced = {"id": "kept", "steps": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello!"}]}
    import_payload(wired.ingest, orjson.dumps(replaced).decode())
    wired.ingest.DeleteTrace(ingest_pb2.DeleteTraceRequest(owner_id=OWNER, trace_id=deleted), timeout=30)

    wait_until(lambda: not _action_scores(scorer, kept), what="the replaced steps' scores to go")
    wait_until(lambda: not _runs(scorer, deleted), what="the deleted trace's runs to go")
    assert _action_scores(scorer, deleted) == []
    request = scorer_pb2.ListTraceScoresRequest(owner_id=OWNER, trace_id=deleted)
    assert list(scorer.stub.ListTraceScores(request, timeout=30).scores) == []


def test_a_scorer_that_stops_puts_its_running_runs_back_in_the_queue(
    wired: Wired, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MODE_VARIABLE, "hold")
    scorer = wired.scorer()
    model_id = wired.trainer.add_model(OWNER)
    run = _score(scorer, _import(wired, "refund"), model_id)
    wait_until(lambda: _run_row(scorer, run.id).status == "running", what="the run to start")

    scorer.dispatcher.stop()

    row = _run_row(scorer, run.id)
    assert (row.status, row.attempts, row.job_id, row.error) == ("queued", 0, None, None)
    assert [(job.status, job.error) for job in _jobs(scorer)] == [
        ("failed", "the scorer stopped while the job was running")
    ]


def _worker_pid(job_id: str) -> int | None:
    """The pid of the local worker process running `job_id`, found by its command line (which its fork server
    sets to the worker's command)."""
    wanted = f"--job {job_key('scorer', job_id)}\0"
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if wanted in cmdline.read_text():
                return int(cmdline.parent.name)
        except OSError:
            continue  # the process ended while we looked
    return None


def test_a_worker_killed_with_sigkill_fails_its_run_which_the_next_sweep_queues_again(
    wired: Wired, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MODE_VARIABLE, "hold")
    scorer = wired.scorer()
    model_id = wired.trainer.add_model(OWNER)
    run = _score(scorer, _import(wired, "refund"), model_id)
    first = wait_until(lambda: _jobs(scorer), what="the first job")[0]
    pid = wait_until(lambda: _worker_pid(first.id), what="the worker process")

    os.kill(pid, signal.SIGKILL)
    killed_at = time.monotonic()
    second = wait_until(lambda: [job for job in _jobs(scorer) if job.id != first.id], what="the retry's job")[0]
    requeued_s = time.monotonic() - killed_at
    scorer.objects.put(f"{job_key('scorer', second.id)}/{RELEASE_FILE}", b"")
    done = finished_run(scorer.stub, OWNER, run.id)

    killed = next(job for job in _jobs(scorer) if job.id == first.id)
    assert (killed.status, killed.exit_code) == ("failed", -9)
    assert killed.error.startswith(
        "the scoring worker ended before reporting this trace: the worker exited with code -9"
    )
    assert requeued_s < 5.0
    assert done.status == SUCCEEDED and _run_row(scorer, run.id).attempts == 2


def test_a_job_whose_scorer_stopped_renewing_its_lease_is_taken_over_and_its_runs_scored_elsewhere(
    wired: Wired, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MODE_VARIABLE, "hold")
    frozen = wired.scorer(lease_s=1.5)
    model_id = wired.trainer.add_model(OWNER)
    run = _score(frozen, _import(wired, "refund"), model_id)
    abandoned = wait_until(lambda: _jobs(frozen), what="the first job")[0]
    # What a replica killed with SIGKILL leaves: no more claims, renewals or settling, and (its dispatcher
    # thread gone) no local worker either.
    frozen.dispatcher.leases.stop()
    frozen.dispatcher._loop.stop()
    worker_died = wait_until(lambda: _worker_pid(abandoned.id) is None, what="the worker's death")
    survivor = wired.scorer(lease_s=1.5)

    takeover = wait_until(lambda: [job for job in _jobs(survivor) if job.id != abandoned.id], what="the takeover")[0]
    survivor.objects.put(f"{job_key('scorer', takeover.id)}/{RELEASE_FILE}", b"")
    done = finished_run(survivor.stub, OWNER, run.id)

    ended = next(job for job in _jobs(survivor) if job.id == abandoned.id)
    assert worker_died
    assert (ended.status, ended.error) == ("failed", "the scorer watching the job stopped (no lease renewal for 1.5 s)")
    assert done.status == SUCCEEDED and _run_row(survivor, run.id).attempts == 1
