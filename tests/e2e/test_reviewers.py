"""Reviewers end to end on both profiles: an owner shares traces, reviewers read and annotate them.

Every route of the OpenAPI document that takes an id, and every id-bearing RPC of the services, is walked with
the owner's ids as a reviewer of every source, a reviewer of the trace's source, a reviewer of another source
only, a revoked reviewer and a stranger: what a caller may see but not change answers 403 (PERMISSION_DENIED)
with the reason, what they may not see 404 (NOT_FOUND), and the owner's data is unchanged afterwards. The
routes come from the running gateway and the RPCs from the protos, so a new one fails here until it has an
expectation. The embedded profile is the session's shared stack (users named `<name>-reviewers`); the cluster
profile is one stack of this module's own.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
import pytest

from stash.rm.v1 import trainer_pb2
from support.claude_code import looping_test_session
from support.ingest import stash_line
from support.processes import stash_rm
from support.reviewing import reviewer_status
from support.rpc_walk import (
    expected_outcomes,
    invoke,
    owner_read_outcomes,
    refused,
    reviewed_trace_owner,
    rpc_outcomes,
    shared_trace_ids,
    unexpected,
)
from support.stack import RunningStack, cluster_env, running_stack

SHOP, LAB = "shop", "lab"
TASK = "olivia-task"
# This module trains no model (that takes minutes), so the owner has no scoring or GEPA run: RPCs taking one
# get an id of nobody's. test_isolation.py walks them with real ones on the cluster profile.
NO_RUN = "no-run-of-anyone"
EVALUATION_WAIT_S = 30
ROLES = ["rita", "sam", "lara", "vic", "stranger"]
ROLE_IDS = ["reviewer of every source", "reviewer of the source", "reviewer of another source", "revoked", "stranger"]
# What each role may read of the owner's two traces (the shop's, which the walks take, and the lab's).
SEES = {"rita": ("trace", "lab_trace"), "sam": ("trace",), "lara": ("lab_trace",), "vic": (), "stranger": ()}
# Routes whose path names the caller's own things (a task id the agent chose, a user to share with).
OWN_NAMESPACE = ("/api/v1/rm/trajectories/", "/api/v1/rm/reviewers/")
NOT_OWNER_SCOPED = ("/api/v1/admin/", "/api/v1/rm/artifacts/")


@dataclass(frozen=True)
class Shared:
    """The owner's things, by id (what `support.rpc_walk` fills requests with), and the user ids by name.
    `reviewer_id` is quinn's, a reviewer of the lab who walks nothing: a walker sharing with itself is refused."""

    user_id: str
    trace: str
    lab_trace: str
    step: str
    annotation: str
    model: str
    key: str
    reviewer_id: str
    user_ids: dict[str, str]
    scoring_run: str = NO_RUN
    gepa_run: str = NO_RUN
    task: str = TASK
    source: str = SHOP

    @property
    def traces(self) -> list[str]:
        return [self.trace, self.lab_trace]


@pytest.fixture(scope="module", params=["embedded", "cluster"])
def stack(request: pytest.FixtureRequest, embedded_stack: RunningStack) -> Iterator[RunningStack]:
    """The session's embedded stack as this module's, or a cluster-profile stack of its own."""
    if request.param == "embedded":
        yield embedded_stack.for_module("reviewers")
        return
    env = cluster_env(request.getfixturevalue("module_postgres_url"), request.getfixturevalue("module_redis_url"))
    with running_stack(request.getfixturevalue("tmp_path_factory").mktemp("reviewers"), **env) as running:
        yield running


def user(stack: RunningStack, name: str) -> str:
    """A user's name on the stack (the embedded stack's users carry this module's suffix)."""
    return f"{name}{stack.user_suffix}"


@pytest.fixture(scope="module")
def users(stack: RunningStack) -> Iterator[dict[str, httpx.Client]]:
    """The owner, reviewers of every source, of the shop, of the lab, one revoked, and a stranger."""
    names = ("olivia", *ROLES)
    clients = {name: stack.client(stack.create_user(name)) for name in names}
    yield clients
    for client in clients.values():
        client.close()


def _ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, f"{response.request.method} {response.request.url}: {response.text}"
    return response.json() if response.content else None


def _import(client: httpx.Client, external_id: str, source_id: str) -> str:
    body = {"format": "stash", "data": stash_line(external_id), "source_id": source_id}
    return str(_ok(client.post("/traces/import", json=body))["trace_ids"][0])


@pytest.fixture(scope="module")
def shared(stack: RunningStack, users: dict[str, httpx.Client]) -> Shared:
    owner = users["olivia"]
    trace, lab_trace = _import(owner, "shop-1", SHOP), _import(owner, "lab-1", LAB)
    step = _ok(owner.get(f"/traces/{trace}"))["steps"][2]["id"]
    annotation = _ok(owner.post(f"/traces/{trace}/annotations", json={"step_id": step, "rating": 1}), 201)
    _ok(owner.put("/trace-sources", json={"source_id": SHOP, "name": "Olivia's shop"}))
    # A model that fails at once (no such base model): its id is real, and no CPU goes to training.
    body = {"name": "olivia's", "trace_ids": [trace, lab_trace], "base_model": "/no/such/model"}
    model = _ok(owner.post("/reward-models", json=body))["id"]
    _ok(owner.post(f"/trajectories/{TASK}/events", json={"events": [{"action": "edit", "target_files": ["a.py"]}]}))
    for name, source_ids in (("rita", None), ("sam", [SHOP]), ("lara", [LAB]), ("vic", None)):
        _ok(owner.put(f"/reviewers/{user(stack, name)}", json={"source_ids": source_ids}), 201)
    _ok(owner.delete(f"/reviewers/{user(stack, 'vic')}"), 204)
    stack.create_user("quinn")
    quinn = _ok(owner.put(f"/reviewers/{user(stack, 'quinn')}", json={"source_ids": [LAB]}), 201)["reviewer_id"]
    user_ids = {name: _ok(client.get("/me"))["user_id"] for name, client in users.items()}
    return Shared(
        user_id=user_ids["olivia"],
        trace=trace,
        lab_trace=lab_trace,
        step=step,
        annotation=annotation["id"],
        model=model,
        key=_ok(owner.get("/keys"))[0]["id"],
        reviewer_id=quinn,
        user_ids=user_ids,
    )


def snapshot(owner: httpx.Client, shared: Shared) -> dict[str, Any]:
    """What the owner reads about their data; models are left out (the failing one changes by itself)."""
    paths = ["/traces", "/trace-sources", "/reviewers", "/keys", f"/traces/{shared.trace}", "/export/annotations"]
    found = {path: owner.get(path).text for path in paths}
    found["/reward-models"] = sorted(model["id"] for model in _ok(owner.get("/reward-models")))
    return found


def _id_for(name: str, stack: RunningStack, shared: Shared) -> str:
    ids = {"trace_id": shared.trace, "annotation_id": shared.annotation, "model_id": shared.model}
    ids |= {"run_id": NO_RUN, "key_id": shared.key, "task_id": TASK, "reviewer": user(stack, "olivia")}
    return ids[name]


def _body(method: str, path: str, shared: Shared) -> dict[str, Any]:
    bodies = {
        "POST /api/v1/rm/traces/{trace_id}/score": {"reward_model_id": shared.model},
        "POST /api/v1/rm/traces/{trace_id}/annotations": {"step_id": shared.step, "comment": "from the walk"},
        "PATCH /api/v1/rm/annotations/{annotation_id}": {"comment": "changed by a reviewer"},
        "POST /api/v1/rm/traces/{trace_id}/section-summaries": {
            "ranges": [{"first_step_id": shared.step, "last_step_id": shared.step}]
        },
        "POST /api/v1/rm/trajectories/{task_id}/events": {"events": [{"action": "read"}]},
        "PUT /api/v1/rm/reviewers/{reviewer}": {"source_ids": None},
    }
    key = f"{method} {path}"
    return {"json": bodies[key]} if key in bodies else {}


def id_routes(stack: RunningStack) -> list[tuple[str, str, list[str]]]:
    """(METHOD, path, path parameters) of every route with a path parameter that belongs to some user."""
    document = httpx.get(f"{stack.gateway_url}/openapi.json").json()
    routes = []
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            params = [p["name"] for p in operation.get("parameters", []) if p["in"] == "path"]
            if params and not path.startswith(NOT_OWNER_SCOPED):
                routes.append((method.upper(), path, params))
    return routes


def walk(client: httpx.Client, stack: RunningStack, shared: Shared) -> dict[str, int]:
    """Every id route called with the owner's ids: `METHOD path` → status; annotations it made are removed."""
    statuses = {}
    for method, path, params in id_routes(stack):
        url = path
        for name in params:
            url = url.replace(f"{{{name}}}", _id_for(name, stack, shared))
        response = client.request(
            method, client.base_url.copy_with(raw_path=url.encode()), **_body(method, path, shared)
        )
        statuses[f"{method} {path}"] = response.status_code
        if response.status_code == 403:
            assert response.json()["detail"], f"{method} {path}: a 403 says why"
        if method == "POST" and path.endswith("/annotations") and response.status_code == 201:
            _ok(client.delete(f"/annotations/{response.json()['id']}"), 204)
    return statuses


def _expected(statuses: dict[str, int], visible: bool) -> dict[str, Any]:
    wanted: dict[str, Any] = {}
    for route in statuses:
        if any(prefix in route for prefix in OWN_NAMESPACE):
            wanted[route] = "own"
        elif visible:
            wanted[route] = reviewer_status(route)
        else:
            wanted[route] = 404
    return wanted


def _outcomes(statuses: dict[str, int]) -> dict[str, Any]:
    return {
        route: "own" if any(prefix in route for prefix in OWN_NAMESPACE) and status < 300 else status
        for route, status in statuses.items()
    }


@pytest.mark.parametrize("who", ROLES, ids=ROLE_IDS)
def test_every_id_route_as_each_role_is_what_the_role_allows_and_changes_nothing(
    stack: RunningStack, users: dict[str, httpx.Client], shared: Shared, who: str
) -> None:
    before = snapshot(users["olivia"], shared)

    statuses = walk(users[who], stack, shared)

    assert len(statuses) >= 15, sorted(statuses)
    assert _outcomes(statuses) == _expected(statuses, visible="trace" in SEES[who])
    assert snapshot(users["olivia"], shared) == before


def test_the_owner_lists_changes_and_revokes_grants(
    stack: RunningStack, users: dict[str, httpx.Client], shared: Shared
) -> None:
    owner, lara = users["olivia"], user(stack, "lara")
    grants = {grant["reviewer_name"]: grant for grant in _ok(owner.get("/reviewers"))}

    assert {name: (g["all_sources"], g["source_ids"]) for name, g in grants.items()} == {
        user(stack, "rita"): (True, []),
        user(stack, "sam"): (False, [SHOP]),
        lara: (False, [LAB]),
        user(stack, "quinn"): (False, [LAB]),
    }
    assert _ok(owner.put(f"/reviewers/{lara}", json={"source_ids": [LAB, SHOP]}))["source_ids"] == [LAB, SHOP]
    assert _ok(users["lara"].get(f"/traces/{shared.trace}"))["id"] == shared.trace
    _ok(owner.put(f"/reviewers/{lara}", json={"source_ids": [LAB]}))
    assert users["lara"].get(f"/traces/{shared.trace}").status_code == 404
    unknown = owner.put("/reviewers/nobody", json={})
    assert unknown.status_code == 404 and "nobody" in unknown.text
    itself = owner.put(f"/reviewers/{user(stack, 'olivia')}", json={})
    assert itself.status_code == 422 and "another user" in itself.text
    refused = users["rita"].get("/reviewers")
    assert _ok(refused) == []


def test_the_shared_list_has_the_owner_filters_paging_and_sorting(
    stack: RunningStack, users: dict[str, httpx.Client], shared: Shared
) -> None:
    reviewer, olivia = users["rita"], user(stack, "olivia")

    listed = _ok(reviewer.get("/shared/traces"))
    assert listed["total"] == 2
    assert {(t["id"], t["owner_name"], t["source_name"]) for t in listed["traces"]} == {
        (shared.trace, olivia, "Olivia's shop"),
        (shared.lab_trace, olivia, LAB),
    }
    assert all(trace["latest_score"] is None for trace in listed["traces"])
    assert [t["id"] for t in _ok(reviewer.get("/shared/traces", params={"source_id": SHOP}))["traces"]] == [
        shared.trace
    ]
    paged = _ok(reviewer.get("/shared/traces", params={"limit": 1, "offset": 1, "sort": "source"}))
    assert (paged["total"], [t["id"] for t in paged["traces"]]) == (2, [shared.trace])
    assert _ok(reviewer.get("/shared/traces", params={"owner_id": "someone-else"}))["total"] == 0
    assert _ok(reviewer.get("/shared/traces", params={"imported_to": "2000-01-01"}))["total"] == 0
    assert _ok(users["sam"].get("/shared/traces"))["total"] == 1
    assert _ok(users["vic"].get("/shared/traces"))["total"] == 0
    owners = _ok(reviewer.get("/shared/owners"))
    assert [(o["owner_name"], o["all_sources"]) for o in owners] == [(olivia, True)]
    sources = [
        (s["owner_name"], s["source_id"], s["name"], s["trace_count"]) for s in _ok(reviewer.get("/shared/sources"))
    ]
    assert sources == [(olivia, LAB, LAB, 1), (olivia, SHOP, "Olivia's shop", 1)]
    assert [s["source_id"] for s in _ok(users["sam"].get("/shared/sources"))] == [SHOP]
    assert _ok(users["vic"].get("/shared/sources")) == _ok(users["stranger"].get("/shared/sources")) == []
    assert _ok(reviewer.get("/traces"))["total"] == 0


def test_a_reviewer_annotates_and_the_owner_sees_and_exports_the_author(
    stack: RunningStack, users: dict[str, httpx.Client], shared: Shared
) -> None:
    reviewer, owner = users["sam"], users["olivia"]
    sam, olivia = user(stack, "sam"), user(stack, "olivia")
    quote = {"text": "refund", "prefix": "", "suffix": ""}
    step = next(s for s in _ok(reviewer.get(f"/traces/{shared.trace}"))["steps"] if "refund" in s["content"])
    mine = _ok(
        reviewer.post(
            f"/traces/{shared.trace}/annotations",
            json={"step_id": step["id"], "rating": -1, "comment": "no policy check", "quote": quote},
        ),
        201,
    )
    edited = _ok(reviewer.patch(f"/annotations/{mine['id']}", json={"comment": "no refund policy check"}))
    flagged = _ok(
        reviewer.patch(f"/annotations/{shared.annotation}", json={"label_error": True, "label_error_note": "wrong"})
    )
    detail = _ok(reviewer.get(f"/traces/{shared.trace}"))

    assert (mine["author_name"], edited["comment"]) == (sam, "no refund policy check")
    assert (flagged["label_error"], flagged["author_name"]) == (True, olivia)
    assert detail["reviewing"] is True and detail["scores"] == [] and detail["source_name"] == "Olivia's shop"
    assert {a["author_name"] for a in detail["annotations"]} == {olivia, sam}
    exported = [orjson.loads(line) for line in owner.get("/export/annotations").text.splitlines()]
    by_author = {line["author_name"]: line for line in exported}
    assert by_author[sam]["author_id"] == shared.user_ids["sam"]
    assert by_author[sam]["comment"] == "no refund policy check"
    assert reviewer.get("/export/annotations").text == ""
    query = _ok(reviewer.post("/query", json={"sql": "SELECT count(*) AS n FROM annotations"}))
    assert query["rows"] == [["0"]]  # bigint counts travel as strings
    _ok(owner.patch(f"/annotations/{shared.annotation}", json={"label_error": False, "label_error_note": None}))
    _ok(reviewer.delete(f"/annotations/{mine['id']}"), 204)


def test_a_reviewer_cannot_train_on_shared_traces_and_the_reason_says_why(
    users: dict[str, httpx.Client], shared: Shared
) -> None:
    refused = users["rita"].post(
        "/reward-models", json={"name": "theirs", "trace_ids": [shared.trace, shared.lab_trace]}
    )

    assert refused.status_code == 403 and "shared with you for review" in refused.json()["detail"]


def test_a_trace_names_only_the_callers_own_models_trained_on_it(
    users: dict[str, httpx.Client], shared: Shared
) -> None:
    owner, reviewer = users["olivia"], users["rita"]
    theirs = [_import(reviewer, f"rita-{n}", SHOP) for n in (1, 2)]
    body = {"name": "rita's", "trace_ids": theirs, "base_model": "/no/such/model"}
    their_model = _ok(reviewer.post("/reward-models", json=body))["id"]

    def trained(client: httpx.Client, trace: str) -> list[dict[str, str]]:
        return list(_ok(client.get(f"/traces/{trace}"))["trained_models"])

    assert trained(owner, shared.trace) == [{"id": shared.model, "name": "olivia's"}]
    assert trained(reviewer, shared.trace) == [] and trained(users["sam"], shared.trace) == []
    assert trained(reviewer, theirs[0]) == [{"id": their_model, "name": "rita's"}]
    assert users["stranger"].get(f"/traces/{shared.trace}").status_code == 404


def test_the_cli_adds_lists_and_removes_reviewers(stack: RunningStack, users: dict[str, httpx.Client]) -> None:
    key, rita = stack.create_user("cli-owner"), user(stack, "rita")
    env = {**stack.env, "STASH_API_KEY": key}

    added = stash_rm("reviewers", "add", rita, "--source", SHOP, "--source", LAB, env=env)
    listed = stash_rm("reviewers", "list", env=env)
    removed = stash_rm("reviewers", "remove", rita, env=env)
    again = stash_rm("reviewers", "remove", rita, env=env)

    assert added.returncode == 0 and f"{rita} now reviews lab, shop" in added.stdout, added.stderr
    assert listed.returncode == 0 and rita in listed.stdout and "lab, shop" in listed.stdout
    assert removed.returncode == 0 and "no longer reviews" in removed.stdout
    assert again.returncode == 1 and "HTTP 404" in again.stderr


@pytest.mark.parametrize("who", ROLES, ids=ROLE_IDS)
def test_every_id_bearing_rpc_as_each_role_finds_at_most_what_ingest_shares(
    stack: RunningStack, users: dict[str, httpx.Client], shared: Shared, who: str
) -> None:
    """The services' RPCs called with the role's own id as owner_id (what the gateway passes for the caller) on
    the owner's ids: ingest applies the grant (reads and annotating for a reviewer of the trace, the owner's
    actions refused with the reason), and the labeler, scorer, trainer and GEPA find nothing of the owner's."""
    before = snapshot(users["olivia"], shared)
    caller_id, sees_trace = shared.user_ids[who], "trace" in SEES[who]

    outcomes = rpc_outcomes(stack, caller_id, shared)

    wrong = unexpected(outcomes, expected_outcomes(outcomes, sees_trace))
    assert not wrong, f"LEAK? RPCs as {who} on the owner's ids: {wrong}"
    assert shared_trace_ids(stack, caller_id, shared.user_id) == sorted(getattr(shared, t) for t in SEES[who])
    if sees_trace:
        assert reviewed_trace_owner(stack, caller_id, shared.trace) == (shared.user_id, True)
    for annotation in _ok(users["olivia"].get(f"/traces/{shared.trace}"))["annotations"]:
        if annotation["author_id"] == caller_id:
            _ok(users["olivia"].delete(f"/annotations/{annotation['id']}"), 204)
    assert snapshot(users["olivia"], shared) == before


def test_the_gateway_reads_a_shared_trace_for_its_owner(users: dict[str, httpx.Client], shared: Shared) -> None:
    """The labeler finds nothing for a reviewer's id (the RPC walk), yet a reviewer's REST reads show the owner's
    evaluation and sections: the gateway passes the owner's id, from ingest's decision, to the other services."""
    owner, reviewer = users["olivia"], users["sam"]
    evaluation = _evaluated(owner, shared.trace)

    assert _ok(reviewer.get(f"/traces/{shared.trace}"))["evaluation"] == evaluation
    sections = f"/traces/{shared.trace}/sections"
    assert _ok(reviewer.get(sections)) == _ok(owner.get(sections))


def _evaluated(client: httpx.Client, trace_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + EVALUATION_WAIT_S
    while time.monotonic() < deadline:
        evaluation = _ok(client.get(f"/traces/{trace_id}"))["evaluation"]
        if evaluation and evaluation["status"] == "succeeded":
            return dict(evaluation)
        time.sleep(0.2)
    raise TimeoutError(f"trace {trace_id} was not evaluated within {EVALUATION_WAIT_S}s")


# The owner's reads that find nothing in this module, which trains no model: they name a run of nobody's, or the
# weights of the model that failed.
NOTHING_HERE = {"ScorerService/GetScoringRun", "GepaService/GetGepaRun", "GepaService/GetSkill"}
NOTHING_HERE |= {"TrainerService/GetWeightsUrl"}


def test_the_owner_reads_with_every_id_bearing_rpc(stack: RunningStack, shared: Shared) -> None:
    """The ids the roles walk are real: the owner reads its rows with each of them."""
    outcomes = owner_read_outcomes(stack, shared)

    assert len(outcomes) >= 20, sorted(outcomes)
    assert set(refused(outcomes)) == NOTHING_HERE, refused(outcomes)


@pytest.mark.parametrize("who", ROLES, ids=ROLE_IDS)
def test_the_owner_s_ids_in_bodies_and_queries_are_what_the_role_allows_and_change_nothing(
    users: dict[str, httpx.Client], shared: Shared, who: str
) -> None:
    """The routes whose ids travel in a body or the query string, called by the role with the owner's ids: the
    owner's model is never found, training on a trace the role sees is refused with the reason, and lists,
    exports, SQL and source names stay the role's own."""
    client, before = users[who], snapshot(users["olivia"], shared)
    mine = _import(client, f"{who}-own", "own")

    not_found = [
        client.post(f"/traces/{mine}/score", json={"reward_model_id": shared.model}),
        client.post("/gepa-runs", json={"reward_model_id": shared.model}),
        client.get("/export/pairs", params={"reward_model_id": shared.model}),
    ]
    training = client.post("/reward-models", json={"name": "theirs", "trace_ids": [mine, *shared.traces]})
    foreign_step = client.post(f"/traces/{mine}/annotations", json={"step_id": shared.step, "rating": 1})
    named = _ok(client.put("/trace-sources", json={"source_id": SHOP, "name": f"{who}'s name for it"}))
    owner_s = ", ".join(f"'{trace}'" for trace in shared.traces)
    counted = _ok(client.post("/query", json={"sql": f"SELECT count(*) AS n FROM traces WHERE id IN ({owner_s})"}))

    assert [r.status_code for r in not_found] == [404, 404, 404], [r.text for r in not_found]
    if SEES[who]:
        assert training.status_code == 403 and "shared with you for review" in training.json()["detail"]
    else:
        assert training.status_code == 404, training.text
    assert foreign_step.status_code == 422 and f"is not a step of trace {mine}" in foreign_step.text
    listed = _ok(client.get("/traces", params={"source_id": SHOP}))["traces"]
    assert not {trace["id"] for trace in listed} & set(shared.traces)
    assert client.get("/export/traces", params={"trace_id": shared.traces}).text == ""
    assert named["owner_id"] == shared.user_ids[who] and named["trace_count"] == len(listed)
    assert counted["rows"] == [["0"]]
    _ok(client.delete(f"/traces/{mine}"), 204)
    assert snapshot(users["olivia"], shared) == before


@pytest.mark.parametrize("who", ROLES, ids=ROLE_IDS)
def test_every_route_without_an_id_shows_the_role_none_of_the_owner_s_ids(
    stack: RunningStack, users: dict[str, httpx.Client], shared: Shared, who: str
) -> None:
    """Every GET of the OpenAPI document without a path parameter (the role's lists, exports, account, the
    evaluator's pages) answers with the role's own rows: none of the owner's ids, except under /shared, whose
    answers the shared-list test checks."""
    document = httpx.get(f"{stack.gateway_url}/openapi.json").json()
    paths = [
        path
        for path, methods in document["paths"].items()
        if "get" in methods and "{" not in path and not path.startswith((*NOT_OWNER_SCOPED, "/api/v1/rm/shared/"))
    ]
    owner_s = [shared.user_id, *shared.traces, shared.step, shared.annotation, shared.model, shared.key]

    leaks = {}
    for path in paths:
        response = users[who].get(users[who].base_url.copy_with(raw_path=path.encode()))
        if found := [value for value in owner_s if value in response.text]:
            leaks[path] = (response.status_code, found)

    assert len(paths) >= 15, paths
    assert not leaks, f"LEAK? the owner's ids as {who}: {leaks}"


def test_the_owner_s_training_pairs_use_reviewers_ratings_and_name_their_authors(
    stack: RunningStack, users: dict[str, httpx.Client], shared: Shared
) -> None:
    """Two more shop traces of the owner's, rated as wholes by reviewers: sam's +1 on one and rita's -1 on the
    other make its one trace pair, naming who rated each side; rita's -1 on the first, which the owner flags as a
    label error, counts for nothing (else that trace's ratings would cancel out)."""
    owner = users["olivia"]
    good, bad = (
        _import_reply(owner, "rated-good", "I checked the policy: order 1182 qualifies, and the refund is started."),
        _import_reply(owner, "rated-bad", "Refund done."),
    )
    for who, trace, rating in (("sam", good, 1), ("rita", bad, -1)):
        _ok(users[who].post(f"/traces/{trace}/annotations", json={"rating": rating}), 201)
    mistaken = _ok(users["rita"].post(f"/traces/{good}/annotations", json={"rating": -1}), 201)["id"]
    _ok(owner.patch(f"/annotations/{mistaken}", json={"label_error": True, "label_error_note": "it was right"}))
    body = {"name": "rated by reviewers", "trace_ids": [good, bad], "base_model": "/no/such/model"}
    model = _ok(owner.post("/reward-models", json=body))["id"]

    pairs = _recorded_pairs(stack, owner, shared.user_id, model)

    assert [(p["chosen_trace_id"], p["chosen_authors"], p["rejected_authors"]) for p in pairs] == [
        (good, [user(stack, "sam")], [user(stack, "rita")])
    ]
    _ok(owner.delete(f"/reward-models/{model}"), 204)
    for trace in (good, bad):
        _ok(owner.delete(f"/traces/{trace}"), 204)


def _import_reply(client: httpx.Client, external_id: str, reply: str) -> str:
    """A shop trace of one request and the agent's reply."""
    steps = [{"role": "user", "content": "I want a refund for order 1182"}, {"role": "assistant", "content": reply}]
    body = {"format": "stash", "data": stash_line(external_id, steps=steps), "source_id": SHOP}
    return str(_ok(client.post("/traces/import", json=body))["trace_ids"][0])


def _recorded_pairs(stack: RunningStack, owner: httpx.Client, owner_id: str, model_id: str) -> list[dict[str, Any]]:
    """The model's recorded pairs with their evidence, once its training has settled (this one fails to load its
    base model after the pairs are recorded)."""
    deadline = time.monotonic() + EVALUATION_WAIT_S
    while _ok(owner.get(f"/reward-models/{model_id}"))["status"] not in ("succeeded", "failed"):
        assert time.monotonic() < deadline, f"model {model_id} did not settle within {EVALUATION_WAIT_S}s"
        time.sleep(0.2)
    export = trainer_pb2.ExportPairsRequest(owner_id=owner_id, reward_model_id=model_id, with_evidence=True)
    data = b"".join(chunk.data for chunk in invoke(stack, "TrainerService/ExportPairs", export))
    return [orjson.loads(line) for line in data.splitlines()]


def test_the_shared_list_filters_by_process_pattern_within_what_is_shared(
    users: dict[str, httpx.Client], shared: Shared
) -> None:
    """The pattern filter finds the owner's traces through the owner's labels, and still only the shared ones."""
    owner = users["olivia"]
    body = {"format": "claude_code", "data": looping_test_session(), "source_id": "loops"}
    looping = str(_ok(owner.post("/traces/import", json=body))["trace_ids"][0])
    _evaluated(owner, looping)

    def matching(who: str) -> list[str]:
        listed = _ok(users[who].get("/shared/traces", params={"pattern": "ping_pong"}))
        return [trace["id"] for trace in listed["traces"]]

    assert (matching("rita"), matching("sam"), matching("stranger")) == ([looping], [], [])
    _ok(owner.delete(f"/traces/{looping}"), 204)
