"""Owner isolation on the cluster profile: every id route of the gateway and every owner-scoped RPC of the
services, called as owner A (alice) with owner B's (bob's) real ids, finds nothing and changes nothing; and
B's read-only key is refused on every write. B's reviewers (of B's source, of every source, of another source
only, revoked) walk them too: they read and annotate at most what B shares with them.

The routes come from the running gateway's OpenAPI and the RPCs from the protos' descriptors, so a new one
fails these tests until it is walked here or listed below with the reason it is not.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
import pytest
from fakes.llm_server import FakeLLM

from support.ingest import stash_line
from support.processes import stash_rm
from support.reviewing import reviewer_status
from support.rpc_walk import (
    OWN_ROWS,
    expected_outcomes,
    otlp_json,
    owner_read_outcomes,
    refused,
    reviewed_trace_owner,
    rpc_outcomes,
    shared_trace_ids,
    unexpected,
)
from support.stack import RunningStack

JOB_WAIT_S = 240
TERMINAL = ("succeeded", "failed")
TASK_ID = "bob-task"
SOURCE_ID = "bob-shop"
REVIEWER = "carol"
# B's other reviewers, for the gRPC walk: of every source, of a source B has no trace in, and one B revoked.
ALL_SOURCES_REVIEWER, OTHER_SOURCE_REVIEWER, REVOKED_REVIEWER = "rita", "lara", "vic"
OTHER_SOURCE = "bob-lab"

# Path parameters that carry an owner's id, and which of B's ids each one takes.
ID_PARAMS = {"trace_id": "trace", "annotation_id": "annotation", "model_id": "model", "run_id": "gepa_run"}
ID_PARAMS |= {"key_id": "key", "task_id": "task", "reviewer": "reviewer"}
# Routes with a path parameter that are not owner-scoped, with the reason.
NOT_OWNER_SCOPED = {
    "/api/v1/admin/users/{name_or_id}": "operator route behind the admin key, which belongs to no owner",
    "/api/v1/admin/users/{name_or_id}/keys": "operator route behind the admin key, which belongs to no owner",
    "/api/v1/admin/evaluator/reviewers/{name_or_id}": "operator route behind the admin key, which belongs to no owner",
    "/api/v1/admin/evaluator/candidates/{candidate_id}/approve": "operator route: a candidate belongs to no owner",
    "/api/v1/admin/evaluator/releases/{number}/rollback": "operator route: a release is the same for everyone",
    "/api/v1/rm/artifacts/{key}": "no bearer at all: a signed URL, whose signature is the check",
}
# Task ids are names the agent chooses, not ids the platform hands out: A's calls address A's own task of that
# name (answered 200) and must neither show nor change B's.
OWN_NAMESPACE = {"/api/v1/rm/trajectories/{task_id}/events", "/api/v1/rm/trajectories/{task_id}/course-correction"}
# A reviewer is a user, not something an owner has: A's calls share (and stop sharing) A's own traces with B's
# reviewer, and must leave B's grant alone.
OWN_NAMESPACE |= {"/api/v1/rm/reviewers/{reviewer}"}
# Routes that take the admin key, not an API key, so no read-only key reaches them.
ADMIN_ROUTES = "/api/v1/admin/"
# POST routes that only read, so a read-only key may call them.
READS_BY_POST = {
    "/api/v1/rm/query": "one read-only SELECT",
    "/api/v1/rm/traces/{trace_id}/section-summaries": "summaries of a trace's sections, computed on read",
    "/api/v1/rm/traces/{trace_id}/completion": "completion estimates of a trace, computed on read",
}


@dataclass(frozen=True)
class Owned:
    """One of everything owner B has, by id."""

    user_id: str
    trace: str
    traces: list[str]
    step: str
    annotation: str
    model: str
    scoring_run: str
    gepa_run: str
    key: str
    read_only_key: str
    reviewer: str
    reviewer_id: str
    # The user id of each reviewer by role: "all sources", "other source", "revoked".
    reviewers_by_role: dict[str, str]
    task: str = TASK_ID
    source: str = SOURCE_ID


def _stand_in(path: str, body: dict[str, Any]) -> str:
    """The reflection model names the skill and proposes a body; the task model answers every request alike."""
    if body["model"] != "stand-in-reflection":
        return "Your refund is approved."
    if body["messages"][-1]["content"].startswith("You name a skill"):
        return '{"name": "Refund desk", "description": "Use when a customer asks for a refund."}'
    return "```markdown\n# Refunds\n\nApprove the refund the customer asked for.\n```"


@pytest.fixture(scope="module")
def llm(cluster_llm: FakeLLM) -> Iterator[FakeLLM]:
    """The session stack's fake LLM, answering as this module's stand-in models."""
    answering = cluster_llm.reply, cluster_llm.status_of
    cluster_llm.reply, cluster_llm.status_of = _stand_in, None
    yield cluster_llm
    cluster_llm.reply, cluster_llm.status_of = answering


@pytest.fixture(scope="module")
def stack(cluster_stack: RunningStack, llm: FakeLLM) -> RunningStack:
    # The session's cluster stack itself, not `for_module`: the reviewers are addressed by their plain names, which
    # no other module sharing the stack uses. Its changes wait an hour to be scored, so B's data is settled once
    # the ready model's runs finished.
    return cluster_stack


def _waited(what: str, probe: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + JOB_WAIT_S
    while time.monotonic() < deadline:
        if (found := probe()) is not None:
            return found
        time.sleep(0.5)
    raise TimeoutError(f"{what} within {JOB_WAIT_S}s")


def _finished(client: httpx.Client, path: str) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        found = client.get(path).json()
        return found if found["status"] in TERMINAL else None

    return _waited(f"{path} did not finish", probe)


def _ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, f"{response.request.method} {response.request.url}: {response.text}"
    return response.json() if response.content else None


def _rated_trace(client: httpx.Client, number: int) -> str:
    """A trace from B's source whose lookup call is rated + and whose answer −: action pairs to train on."""
    trace = orjson.loads(stash_line(f"bob-{number}"))
    trace["steps"][1]["content"] = f"I want a refund for order {1100 + number}"
    body = {"format": "stash", "data": orjson.dumps(trace).decode(), "source_id": SOURCE_ID}
    trace_id = str(_ok(client.post("/traces/import", json=body))["trace_ids"][0])
    steps = _ok(client.get(f"/traces/{trace_id}"))["steps"]
    for step, rating in ((steps[2], 1), (steps[4], -1)):
        _ok(client.post(f"/traces/{trace_id}/annotations", json={"step_id": step["id"], "rating": rating}), 201)
    return trace_id


def _commented(client: httpx.Client, trace_id: str) -> tuple[str, str]:
    """A flagged annotation quoting the user's step; returns (annotation id, step id)."""
    step = _ok(client.get(f"/traces/{trace_id}"))["steps"][1]
    quote = {"text": "refund", "prefix": "I want a ", "suffix": " for order"}
    body = {"step_id": step["id"], "comment": "the request", "quote": quote}
    annotation = _ok(client.post(f"/traces/{trace_id}/annotations", json=body), 201)
    flag = {"label_error": True, "label_error_note": "not a refund"}
    _ok(client.patch(f"/annotations/{annotation['id']}", json=flag))
    return annotation["id"], step["id"]


def _scoring_run(client: httpx.Client, trace_ids: list[str]) -> str:
    """A finished scoring run of B's: the scorer scores the owner's traces once a model is ready; waits until
    every run of B's traces has finished."""

    def probe() -> str | None:
        runs = [run for trace_id in trace_ids for run in _ok(client.get(f"/traces/{trace_id}"))["scoring_runs"]]
        return runs[0]["id"] if runs and all(run["status"] in TERMINAL for run in runs) else None

    return str(_waited("B's traces were not scored", probe))


def _settled_labels(client: httpx.Client, trace_ids: list[str]) -> None:
    """Wait until the labeler finished with every trace, so that B's data no longer changes by itself."""
    for trace_id in trace_ids:

        def probe(trace_id: str = trace_id) -> bool | None:
            evaluation = _ok(client.get(f"/traces/{trace_id}"))["evaluation"]
            return True if evaluation and evaluation["status"] in TERMINAL else None

        _waited(f"trace {trace_id} was not labelled", probe)


@pytest.fixture(scope="module")
def owned(stack: RunningStack, bob: httpx.Client, llm: FakeLLM) -> Owned:
    """B's traces, annotations, source name, live task, reward model, scoring run, GEPA run and keys."""
    traces = [_rated_trace(bob, number) for number in range(4)]
    annotation, step = _commented(bob, traces[0])
    _ok(bob.put("/trace-sources", json={"source_id": SOURCE_ID, "name": "Bob's shop"}))
    _ok(bob.post(f"/trajectories/{TASK_ID}/events", json={"events": [{"action": "edit", "target_files": ["a.py"]}]}))
    created = _ok(bob.post("/reward-models", json={"name": "bob's model", "trace_ids": traces, "epochs": 1}))
    model = _finished(bob, f"/reward-models/{created['id']}")
    assert model["status"] == "succeeded", model["error"]
    scoring_run = _scoring_run(bob, traces)
    gepa = {
        "reward_model_id": model["id"],
        "task_model": "openai/stand-in-task",
        "task_api_base": f"{llm.url}/v1",
        "reflection_model": "openai/stand-in-reflection",
        "max_metric_calls": 4,
    }
    gepa_run = _finished(bob, f"/gepa-runs/{_ok(bob.post('/gepa-runs', json=gepa))['id']}")
    assert gepa_run["status"] == "succeeded", gepa_run["error"]
    reader = _ok(bob.post("/keys", json={"name": "reader", "read_only": True}), 201)
    stack.create_user(REVIEWER)
    reviewer_id = _ok(bob.put(f"/reviewers/{REVIEWER}", json={"source_ids": [SOURCE_ID]}), 201)["reviewer_id"]
    reviewers_by_role = _other_reviewers(stack, bob)
    _settled_labels(bob, traces)
    return Owned(
        user_id=_ok(bob.get("/me"))["user_id"],
        trace=traces[0],
        traces=traces,
        step=step,
        annotation=annotation,
        model=model["id"],
        scoring_run=scoring_run,
        gepa_run=gepa_run["id"],
        key=_ok(bob.get("/keys"))[0]["id"],
        read_only_key=reader["key"],
        reviewer=REVIEWER,
        reviewer_id=reviewer_id,
        reviewers_by_role=reviewers_by_role,
    )


def _other_reviewers(stack: RunningStack, bob: httpx.Client) -> dict[str, str]:
    """B shares every source with one user and only a source without B's traces with another, and revokes a
    third user's grant; returns their user ids by role."""
    grants = {ALL_SOURCES_REVIEWER: None, OTHER_SOURCE_REVIEWER: [OTHER_SOURCE], REVOKED_REVIEWER: None}
    ids = {}
    for name, source_ids in grants.items():
        stack.create_user(name)
        ids[name] = _ok(bob.put(f"/reviewers/{name}", json={"source_ids": source_ids}), 201)["reviewer_id"]
    _ok(bob.delete(f"/reviewers/{REVOKED_REVIEWER}"), 204)
    return {
        "all sources": ids[ALL_SOURCES_REVIEWER],
        "other source": ids[OTHER_SOURCE_REVIEWER],
        "revoked": ids[REVOKED_REVIEWER],
    }


def snapshot(client: httpx.Client, owned: Owned) -> dict[str, Any]:
    """Everything B can read about its data (the weights link alone is left out: it is signed anew each time)."""
    paths = [
        "/traces",
        "/trace-sources",
        "/reviewers",
        "/keys",
        "/reward-models",
        f"/reward-models/{owned.model}",
        "/gepa-runs",
        f"/gepa-runs/{owned.gepa_run}",
        f"/trajectories/{owned.task}/course-correction",
        *(f"/traces/{trace_id}" for trace_id in owned.traces),
        f"/traces/{owned.trace}/sections",
    ]
    found: dict[str, Any] = {path: _ok(client.get(path)) for path in paths}
    for path in ("/export/traces", "/export/annotations", f"/export/pairs?reward_model_id={owned.model}"):
        found[path] = client.get(path).text
    return found


@pytest.fixture(scope="module")
def before(bob: httpx.Client, owned: Owned) -> dict[str, Any]:
    return snapshot(bob, owned)


@pytest.fixture(scope="module")
def openapi(stack: RunningStack) -> dict[str, Any]:
    """The OpenAPI document the running gateway serves."""
    return dict(httpx.get(f"{stack.gateway_url}/openapi.json").json())


def operations(openapi: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(METHOD, path template, operation) for every operation of the document."""
    for path, methods in openapi["paths"].items():
        for method, operation in methods.items():
            yield method.upper(), path, operation


def path_params(operation: dict[str, Any]) -> list[str]:
    return [param["name"] for param in operation.get("parameters", []) if param["in"] == "path"]


def url_of(path: str, operation: dict[str, Any], owned: Owned) -> str:
    """The path template filled in with B's ids."""
    for name in path_params(operation):
        path = path.replace(f"{{{name}}}", getattr(owned, ID_PARAMS[name]))
    return path


def body_of(method: str, path: str, operation: dict[str, Any], owned: Owned) -> dict[str, Any]:
    """A valid request body for the operation built from B's ids, so that only ownership can refuse it."""
    bodies: dict[str, Callable[[], dict[str, Any]]] = {
        "POST /api/v1/rm/traces/{trace_id}/score": lambda: {"json": {"reward_model_id": owned.model}},
        "POST /api/v1/rm/traces/{trace_id}/annotations": lambda: {"json": {"step_id": owned.step, "rating": 1}},
        "PATCH /api/v1/rm/annotations/{annotation_id}": lambda: {"json": {"comment": "changed by someone else"}},
        "POST /api/v1/rm/traces/{trace_id}/section-summaries": lambda: {
            "json": {"ranges": [{"first_step_id": owned.step, "last_step_id": owned.step}]}
        },
        "POST /api/v1/rm/trajectories/{task_id}/events": lambda: {"json": {"events": [{"action": "read"}]}},
        "POST /api/v1/rm/query": lambda: {"json": {"sql": "SELECT count(*) AS n FROM traces"}},
        "POST /api/v1/rm/keys": lambda: {"json": {"name": "more"}},
        "POST /api/v1/rm/traces/import": lambda: {"json": {"format": "stash", "data": stash_line("written")}},
        "PUT /api/v1/rm/reviewers/{reviewer}": lambda: {"json": {"source_ids": [owned.source]}},
        "PUT /api/v1/rm/trace-sources": lambda: {"json": {"source_id": owned.source, "name": "renamed"}},
        "POST /api/v1/rm/reward-models": lambda: {"json": {"name": "more", "trace_ids": owned.traces}},
        "POST /api/v1/rm/gepa-runs": lambda: {"json": {"reward_model_id": owned.model}},
        "POST /api/v1/me/transcripts": lambda: {"content": stash_line("transcript").encode()},
        "PUT /api/v1/rm/evaluator/consent": lambda: {"json": {"text_version": "v1", "source_ids": [owned.source]}},
        "POST /api/v1/rm/evaluator/reviews": lambda: {"json": {"comparison_id": owned.model, "verdict": "better"}},
        "POST /api/v1/rm/otel/v1/traces": lambda: {
            "content": otlp_json(),
            "headers": {"Content-Type": "application/json"},
        },
    }
    builder = bodies.get(f"{method} {path}")
    if builder is None:
        assert not operation.get("requestBody", {}).get("required"), f"{method} {path} needs a body in body_of"
        return {}
    return builder()


def call(client: httpx.Client, method: str, path: str, operation: dict[str, Any], owned: Owned) -> httpx.Response:
    """The operation on B's ids, with a valid body, at its full path on the client's gateway."""
    url = client.base_url.copy_with(raw_path=url_of(path, operation, owned).encode())
    return client.request(method, url, **body_of(method, path, operation, owned))


def id_operations(openapi: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """Every operation that takes an owner's id in its path; fails on a parameter this module does not know."""
    walked = []
    for method, path, operation in operations(openapi):
        params = path_params(operation)
        if not params or path in NOT_OWNER_SCOPED:
            continue
        unknown = [name for name in params if name not in ID_PARAMS]
        assert not unknown, f"{method} {path} takes {unknown}: walk it with B's id or list it in NOT_OWNER_SCOPED"
        walked.append((method, path, operation))
    return walked


def test_b_itself_reads_every_id_route_with_its_ids(openapi: dict[str, Any], bob: httpx.Client, owned: Owned) -> None:
    """B itself reads every id route with its ids (so a 404 below is about the owner, not the id)."""
    for method, path, operation in id_operations(openapi):
        if method == "GET":
            response = call(bob, method, path, operation, owned)
            assert response.status_code == 200, f"B's own {method} {path}: {response.text}"


def test_another_owner_gets_404_on_every_id_route_and_changes_nothing(
    openapi: dict[str, Any], alice: httpx.Client, bob: httpx.Client, owned: Owned, before: dict[str, Any]
) -> None:
    walked = id_operations(openapi)
    assert len(walked) >= 15, [f"{method} {path}" for method, path, _ in walked]
    for method, path, operation in walked:
        response = call(alice, method, path, operation, owned)
        if path in OWN_NAMESPACE:
            assert response.is_success, f"{method} {path}: {response.text}"
            assert owned.user_id not in response.text and "a.py" not in response.text
        else:
            assert response.status_code == 404, f"LEAK? {method} {path} as A: {response.status_code} {response.text}"

    assert snapshot(bob, owned) == before


def test_b_s_reviewer_reads_and_annotates_and_is_refused_the_rest_with_the_reason(
    openapi: dict[str, Any], stack: RunningStack, bob: httpx.Client, owned: Owned, before: dict[str, Any]
) -> None:
    """Carol reviews B's source (every trace of B's): the owner's actions answer 403 with the reason, B's models,
    runs and keys stay 404, and what carol annotated in passing is hers to delete."""
    carol_key = stash_rm("keys", "create", REVIEWER, env=stack.env).stdout.split("shown once): ")[1].split()[0]
    with stack.client(carol_key) as carol:
        for method, path, operation in id_operations(openapi):
            response = call(carol, method, path, operation, owned)
            if path in OWN_NAMESPACE:
                assert response.is_success or response.status_code in (404, 422), f"{method} {path}: {response.text}"
                continue
            assert response.status_code == reviewer_status(f"{method} {path}"), f"{method} {path}: {response.text}"
            if response.status_code == 403:
                assert "only" in response.json()["detail"], response.text
            if response.status_code == 201:
                _ok(carol.delete(f"/annotations/{response.json()['id']}"), 204)
        shared = _ok(carol.get("/shared/traces"))
        assert sorted(trace["id"] for trace in shared["traces"]) == sorted(owned.traces)
        assert all(trace["latest_score"] is None for trace in shared["traces"])

    assert snapshot(bob, owned) == before


def test_b_s_ids_in_bodies_and_queries_are_not_found_either(
    alice: httpx.Client, bob: httpx.Client, owned: Owned, before: dict[str, Any]
) -> None:
    """Ids that travel in a body or the query string: A's own trace with B's model or B's step, and so on."""
    mine = str(_ok(alice.post("/traces/import", json={"format": "stash", "data": stash_line("alice")}))["trace_ids"][0])
    refused = [
        alice.post(f"/traces/{mine}/score", json={"reward_model_id": owned.model}),
        alice.post("/reward-models", json={"name": "theirs", "trace_ids": [mine, owned.trace]}),
        alice.post("/gepa-runs", json={"reward_model_id": owned.model}),
        alice.get("/export/pairs", params={"reward_model_id": owned.model}),
    ]
    for response in refused:
        assert response.status_code == 404, f"LEAK? {response.request.url}: {response.status_code} {response.text}"
    foreign_step = alice.post(f"/traces/{mine}/annotations", json={"step_id": owned.step, "rating": 1})
    assert foreign_step.status_code == 422 and f"is not a step of trace {mine}" in foreign_step.text
    assert _ok(alice.get("/traces", params={"source_id": owned.source})) == {"traces": [], "total": 0}
    exported = alice.get("/export/traces", params={"trace_id": owned.traces})
    assert (exported.status_code, exported.text) == (200, ""), exported.text
    named = _ok(alice.put("/trace-sources", json={"source_id": owned.source, "name": "A's name for it"}))
    assert named["owner_id"] != owned.user_id and named["trace_count"] == 0
    assert owned.user_id not in alice.get("/trace-sources").text

    assert snapshot(bob, owned) == before


def test_a_read_only_key_is_refused_on_every_write_and_changes_nothing(
    openapi: dict[str, Any], stack: RunningStack, bob: httpx.Client, owned: Owned, before: dict[str, Any]
) -> None:
    writes = [
        (method, path, operation)
        for method, path, operation in operations(openapi)
        if method != "GET" and path not in READS_BY_POST and not path.startswith(ADMIN_ROUTES)
    ]
    assert len(writes) >= 15, [f"{method} {path}" for method, path, _ in writes]
    with stack.client(owned.read_only_key) as reader:
        assert _ok(reader.get("/me"))["read_only"] is True
        for method, path, operation in writes:
            response = call(reader, method, path, operation, owned)
            assert response.status_code == 403, f"{method} {path} with a read-only key: {response.text}"
            assert "read-only" in response.json()["detail"], response.text

    assert snapshot(bob, owned) == before


# -- gRPC: the services' own RPCs, which trust the owner_id they are given and must scope every query by it
# (the walk itself is tests/support/rpc_walk.py, shared with the reviewer walk on both profiles).


def test_b_itself_reads_with_every_id_bearing_rpc(stack: RunningStack, owned: Owned) -> None:
    """B itself reads its rows with each of its ids (so a NOT_FOUND below is about the owner, not the id)."""
    outcomes = owner_read_outcomes(stack, owned)

    assert len(outcomes) >= 20, sorted(outcomes)
    assert refused(outcomes) == {}


def test_every_owner_scoped_rpc_as_another_owner_is_not_found_or_sees_only_its_own_rows(
    stack: RunningStack, alice: httpx.Client, bob: httpx.Client, owned: Owned, before: dict[str, Any]
) -> None:
    owner_a = _ok(alice.get("/me"))["user_id"]
    outcomes = rpc_outcomes(stack, owner_a, owned)
    wrong = unexpected(outcomes, expected_outcomes(outcomes, sees_trace=False))
    assert not wrong, f"LEAK? RPCs as A on B's ids: {wrong}"
    assert len(outcomes) - len(OWN_ROWS) >= 25, sorted(outcomes)

    assert snapshot(bob, owned) == before


@pytest.mark.parametrize("role", ["all sources", "other source", "revoked"])
def test_every_owner_scoped_rpc_as_b_s_reviewer_reads_and_annotates_at_most(
    role: str, stack: RunningStack, bob: httpx.Client, owned: Owned, before: dict[str, Any]
) -> None:
    """A reviewer's calls carry their own id as owner_id: a reviewer of B's trace reads and annotates it through
    ingest and is refused B's actions; a reviewer of another source, or a revoked one, is a stranger."""
    reviewer_id = owned.reviewers_by_role[role]
    sees_trace = role == "all sources"
    outcomes = rpc_outcomes(stack, reviewer_id, owned)
    wrong = unexpected(outcomes, expected_outcomes(outcomes, sees_trace))
    assert not wrong, f"LEAK? RPCs as B's reviewer ({role}) on B's ids: {wrong}"
    if sees_trace:
        assert reviewed_trace_owner(stack, reviewer_id, owned.trace) == (owned.user_id, True)
    assert shared_trace_ids(stack, reviewer_id, owned.user_id) == (sorted(owned.traces) if sees_trace else [])

    for annotation in _ok(bob.get(f"/traces/{owned.trace}"))["annotations"]:
        if annotation["author_id"] == reviewer_id:
            _ok(bob.delete(f"/annotations/{annotation['id']}"), 204)
    assert snapshot(bob, owned) == before
