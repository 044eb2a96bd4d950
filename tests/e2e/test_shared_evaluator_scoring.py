"""The shared evaluator's releases scoring every imported trace, end to end on the cluster profile.

Two personal models trained on the packaged MiniLM stand for two candidates: the trainer's release decision is
another part, so these tests publish a release themselves, over real gRPC, with the key of the model's training
job (read from the trainer's table, as the trainer knows it). Alice consents to sharing, bob does not: both
accounts' traces are scored. One scoring job at a time, two traces each, so that the order is observable.
"""

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import httpx
import orjson
import pytest
from sqlalchemy import text

from stash.rm.v1 import scorer_pb2, scorer_pb2_grpc
from stash_common.channels import open_channel
from stash_common.db import make_engine
from stash_common.messages import timestamp_of
from support.ingest import stash_line
from support.models import new_bucket, offline_training_env
from support.stack import RunningStack, cluster_env, running_stack

TRAINING_WAIT_S = 300
SCORING_WAIT_S = 300
NO_RELEASE = "no shared evaluator released yet"


@pytest.fixture(scope="module")
def bucket(s3_endpoint_url: str) -> str:
    return new_bucket(s3_endpoint_url, "stash-shared-scoring")


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory,
    module_postgres_url: str,
    module_redis_url: str,
    s3_endpoint_url: str,
    bucket: str,
) -> Iterator[RunningStack]:
    with running_stack(
        tmp_path_factory.mktemp("shared-scoring"),
        **cluster_env(module_postgres_url, module_redis_url),
        **offline_training_env(bucket, s3_endpoint_url),
        STASH_SCORER_MAX_LENGTH="128",
        STASH_SCORER_DEBOUNCE_S="1",
        STASH_SCORER_MAX_ACTIVE_BATCHES="1",
        STASH_SCORER_BATCH_TRACES="2",
        # A trace imported after a release reaches the scorer through ingest's list of settled changes. The
        # settle window guards a cursor against concurrent writers committing out of order; this module's one
        # client writes one request at a time, so two seconds instead of thirty lose nothing here.
        STASH_INGEST_REVISION_SETTLE_S="2",
    ) as running:
        yield running


@pytest.fixture(scope="module")
def scorer(stack: RunningStack) -> Iterator[Any]:
    channel = open_channel(stack.env["STASH_SCORER_ADDRESS"])
    yield scorer_pb2_grpc.ScorerServiceStub(channel)
    channel.close()


@pytest.fixture(scope="module")
def alice(stack: RunningStack) -> Iterator[httpx.Client]:
    with stack.client(stack.create_user("alice")) as client:
        granted = client.put("/evaluator/consent", json={"text_version": "v1", "all_sources": True})
        assert granted.status_code == 200, granted.text
        yield client


@pytest.fixture(scope="module")
def bob(stack: RunningStack) -> Iterator[httpx.Client]:
    with stack.client(stack.create_user("bob")) as client:
        assert client.get("/evaluator/consent").json()["consents"] == []  # never shared: scored all the same
        yield client


def _imported(client: httpx.Client, name: str, order: int) -> str:
    trace = orjson.loads(stash_line(name))
    trace["steps"][1]["content"] = f"I want a refund for order {1100 + order}"
    response = client.post("/traces/import", json={"format": "stash", "data": orjson.dumps(trace).decode()})
    assert response.status_code == 200, response.text
    return str(response.json()["trace_ids"][0])


@pytest.fixture(scope="module")
def alice_traces(alice: httpx.Client) -> list[str]:
    """Alice's traces in import order, each with its lookup call rated + and its answer rated −."""
    trace_ids = []
    for number in range(4):
        trace_id = _imported(alice, f"shared-alice-{number}", number)
        steps = alice.get(f"/traces/{trace_id}").json()["steps"]
        for step, rating in ((steps[2], 1), (steps[4], -1)):
            response = alice.post(f"/traces/{trace_id}/annotations", json={"step_id": step["id"], "rating": rating})
            assert response.status_code == 201, response.text
        trace_ids.append(trace_id)
    return trace_ids


@pytest.fixture(scope="module")
def bob_traces(bob: httpx.Client) -> list[str]:
    return [_imported(bob, f"shared-bob-{number}", 10 + number) for number in range(2)]


def _waited(what: str, timeout_s: float, probe: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (found := probe()) is not None:
            return found
        time.sleep(0.5)
    raise TimeoutError(f"{what} within {timeout_s}s")


def _trained(client: httpx.Client, name: str, trace_ids: list[str], epochs: int) -> dict[str, Any]:
    created = client.post("/reward-models", json={"name": name, "trace_ids": trace_ids, "epochs": epochs})
    assert created.status_code == 200, created.text

    def probe() -> dict[str, Any] | None:
        model = client.get(f"/reward-models/{created.json()['id']}").json()
        return model if model["status"] in ("succeeded", "failed") else None

    model = _waited(f"reward model {name} did not finish", TRAINING_WAIT_S, probe)
    assert model["status"] == "succeeded", model["error"]
    return model


def _job_key(postgres_url: str, model_id: str) -> str:
    """The key of the training job that left the model's checkpoint, as the trainer records it."""
    engine = make_engine(postgres_url)
    with engine.connect() as connection:
        job_id = connection.execute(text("SELECT job_id FROM reward_models WHERE id = :id"), {"id": model_id}).scalar()
    engine.dispose()
    return f"jobs/trainer/{job_id}"


def _release_runs(postgres_url: str) -> int:
    engine = make_engine(postgres_url)
    with engine.connect() as connection:
        count = connection.execute(text("SELECT count(*) FROM scoring_runs WHERE release_number IS NOT NULL")).scalar()
    engine.dispose()
    return int(count or 0)


def _publish(scorer: Any, number: int, job_key: str, released_at: datetime) -> None:
    scorer.PublishEvaluatorRelease(
        scorer_pb2.PublishEvaluatorReleaseRequest(
            number=number, job_key=job_key, released_at=timestamp_of(released_at)
        ),
        timeout=30,
    )


def _shared(client: httpx.Client, trace_id: str) -> dict[str, Any]:
    response = client.get(f"/traces/{trace_id}")
    assert response.status_code == 200, response.text
    return dict(response.json()["shared_evaluator"])


def _scored_by(client: httpx.Client, trace_id: str, release: int) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        shared = _shared(client, trace_id)
        return shared if shared["release"] == release else None

    return _waited(f"trace {trace_id} was not scored by release {release}", SCORING_WAIT_S, probe)


def _action_ids(client: httpx.Client, trace_id: str) -> list[str]:
    steps = client.get(f"/traces/{trace_id}").json()["steps"]
    return [
        step["id"] for step in steps if step["role"] == "assistant" and (step["tool_name"] or step["content"].strip())
    ]


@pytest.fixture(scope="module")
def first(alice: httpx.Client, alice_traces: list[str], module_postgres_url: str) -> dict[str, Any]:
    model = _trained(alice, "candidate one", alice_traces, epochs=1)
    return {**model, "job_key": _job_key(module_postgres_url, model["id"])}


@pytest.fixture(scope="module")
def second(alice: httpx.Client, alice_traces: list[str], module_postgres_url: str) -> dict[str, Any]:
    model = _trained(alice, "candidate two", alice_traces, epochs=3)
    return {**model, "job_key": _job_key(module_postgres_url, model["id"])}


T0 = datetime(2026, 12, 1, tzinfo=UTC)


def test_before_any_release_a_trace_says_so(alice: httpx.Client, alice_traces: list[str]) -> None:
    shared = _shared(alice, alice_traces[0])

    assert shared == {
        "release": None,
        "current_release": None,
        "trace_score": None,
        "action_scores": [],
        "scored_at": None,
        "reason": NO_RELEASE,
    }
    listed = alice.get("/traces").json()["traces"]
    assert {item["shared_evaluator"] for item in listed} == {None}


def test_a_bad_publication_is_refused_naming_the_field(scorer: Any, first: dict[str, Any]) -> None:
    for number, job_key, field in ((0, first["job_key"], "number"), (1, "", "job_key"), (1, "models/x", "job_key")):
        with pytest.raises(grpc.RpcError) as refused:
            _publish(scorer, number, job_key, T0)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert field in (refused.value.details() or ""), refused.value.details()
    with pytest.raises(grpc.RpcError) as unknown:
        _publish(scorer, 1, "jobs/trainer/no-such-job", T0)
    assert unknown.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_a_release_scores_every_trace_of_both_accounts_with_the_personal_models_credit(
    scorer: Any,
    alice: httpx.Client,
    bob: httpx.Client,
    alice_traces: list[str],
    bob_traces: list[str],
    first: dict[str, Any],
) -> None:
    _publish(scorer, 1, first["job_key"], T0)

    for client, trace_id in [*((alice, item) for item in alice_traces), *((bob, item) for item in bob_traces)]:
        shared = _scored_by(client, trace_id, 1)
        assert shared["current_release"] == 1 and shared["reason"] is None
        assert [score["step_id"] for score in shared["action_scores"]] == _action_ids(client, trace_id)
        assert all(-1.0 <= score["credit"] <= 1.0 for score in shared["action_scores"])
        assert shared["trace_score"] is not None and shared["scored_at"] is not None
    # The same checkpoint as alice's personal model: the same credit, displayed the same way.
    detail = alice.get(f"/traces/{alice_traces[0]}").json()
    personal = {score["step_id"]: score["credit"] for score in detail["action_scores"]}
    shared_credit = {score["step_id"]: score["credit"] for score in detail["shared_evaluator"]["action_scores"]}
    assert shared_credit.keys() == personal.keys()
    assert all(abs(shared_credit[step] - personal[step]) < 1e-3 for step in personal)
    listed = {item["id"]: item["shared_evaluator"] for item in bob.get("/traces").json()["traces"]}
    assert {listed[trace_id]["release"] for trace_id in bob_traces} == {1}


def test_publishing_the_same_release_again_changes_nothing(
    scorer: Any, alice: httpx.Client, alice_traces: list[str], first: dict[str, Any], module_postgres_url: str
) -> None:
    before = _shared(alice, alice_traces[0])
    runs = _release_runs(module_postgres_url)

    _publish(scorer, 1, first["job_key"], T0)
    time.sleep(3)  # a few sweeps

    assert _release_runs(module_postgres_url) == runs
    assert _shared(alice, alice_traces[0]) == before


def test_a_new_release_rescores_newest_first_while_the_previous_scores_stay_visible(
    scorer: Any,
    alice: httpx.Client,
    bob: httpx.Client,
    alice_traces: list[str],
    bob_traces: list[str],
    second: dict[str, Any],
) -> None:
    with pytest.raises(grpc.RpcError) as renamed:
        _publish(scorer, 1, second["job_key"], T0 + timedelta(hours=1))
    assert renamed.value.code() == grpc.StatusCode.FAILED_PRECONDITION  # a number names one checkpoint

    _publish(scorer, 2, second["job_key"], T0 + timedelta(hours=1))

    oldest = _shared(alice, alice_traces[0])
    assert (oldest["release"], oldest["current_release"]) == (1, 2)  # not rescored yet: release 1's scores show
    scored_at = [datetime.fromisoformat(_scored_by(alice, trace_id, 2)["scored_at"]) for trace_id in alice_traces]
    assert scored_at == sorted(scored_at, reverse=True)  # the newest import was rescored first
    for trace_id in bob_traces:
        _scored_by(bob, trace_id, 2)
    imported_now = _imported(bob, "shared-bob-new", 20)
    assert _scored_by(bob, imported_now, 2)["action_scores"]


def test_a_rollback_shows_the_earlier_releases_scores_at_once(
    scorer: Any,
    alice: httpx.Client,
    bob: httpx.Client,
    alice_traces: list[str],
    bob_traces: list[str],
    first: dict[str, Any],
    module_postgres_url: str,
) -> None:
    _publish(scorer, 1, first["job_key"], T0 + timedelta(hours=2))

    for client, trace_id in [*((alice, item) for item in alice_traces), *((bob, item) for item in bob_traces)]:
        shared = _shared(client, trace_id)
        assert (shared["release"], shared["current_release"]) == (1, 1)
    runs = _release_runs(module_postgres_url)
    time.sleep(3)
    assert _release_runs(module_postgres_url) <= runs + 1  # only the trace imported under release 2 is scored anew
