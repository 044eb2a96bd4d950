"""Reviewers end to end on the embedded stack: an owner shares traces, reviewers read and annotate them.

Every route of the OpenAPI document that takes an id is walked with the owner's ids as a reviewer of every
source, a reviewer of the trace's source, a reviewer of another source only, a revoked reviewer and a stranger:
what a caller may see but not change answers 403 with the reason, what they may not see 404, and the owner's
data is unchanged afterwards. The routes come from the running gateway, so a new one fails here until it has
an expectation.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
import pytest

from support.ingest import stash_line
from support.processes import stash_rm
from support.reviewing import reviewer_status
from support.stack import RunningStack, running_stack

SHOP, LAB = "shop", "lab"
# Routes whose path names the caller's own things (a task id the agent chose, a user to share with).
OWN_NAMESPACE = ("/api/v1/rm/trajectories/", "/api/v1/rm/reviewers/")
NOT_OWNER_SCOPED = ("/api/v1/admin/", "/api/v1/rm/artifacts/")


@dataclass(frozen=True)
class Shared:
    """The owner's things, by id."""

    owner_id: str
    trace: str
    lab_trace: str
    step: str
    annotation: str
    model: str
    key: str


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    with running_stack(tmp_path_factory.mktemp("reviewers")) as running:
        yield running


@pytest.fixture(scope="module")
def users(stack: RunningStack) -> Iterator[dict[str, httpx.Client]]:
    """The owner, reviewers of every source, of the shop, of the lab, one revoked, and a stranger."""
    names = ("olivia", "rita", "sam", "lara", "vic", "stranger")
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
def shared(users: dict[str, httpx.Client]) -> Shared:
    owner = users["olivia"]
    trace, lab_trace = _import(owner, "shop-1", SHOP), _import(owner, "lab-1", LAB)
    step = _ok(owner.get(f"/traces/{trace}"))["steps"][2]["id"]
    annotation = _ok(owner.post(f"/traces/{trace}/annotations", json={"step_id": step, "rating": 1}), 201)
    _ok(owner.put("/trace-sources", json={"source_id": SHOP, "name": "Olivia's shop"}))
    # A model that fails at once (no such base model): its id is real, and no CPU goes to training.
    body = {"name": "olivia's", "trace_ids": [trace, lab_trace], "base_model": "/no/such/model"}
    model = _ok(owner.post("/reward-models", json=body))["id"]
    _ok(owner.put("/reviewers/rita", json={"source_ids": None}), 201)
    _ok(owner.put("/reviewers/sam", json={"source_ids": [SHOP]}), 201)
    _ok(owner.put("/reviewers/lara", json={"source_ids": [LAB]}), 201)
    _ok(owner.put("/reviewers/vic", json={}), 201)
    _ok(owner.delete("/reviewers/vic"), 204)
    return Shared(
        owner_id=_ok(owner.get("/me"))["user_id"],
        trace=trace,
        lab_trace=lab_trace,
        step=step,
        annotation=annotation["id"],
        model=model,
        key=_ok(owner.get("/keys"))[0]["id"],
    )


def snapshot(owner: httpx.Client, shared: Shared) -> dict[str, Any]:
    """What the owner reads about their data; models are left out (the failing one changes by itself)."""
    paths = ["/traces", "/trace-sources", "/reviewers", "/keys", f"/traces/{shared.trace}", "/export/annotations"]
    found = {path: owner.get(path).text for path in paths}
    found["/reward-models"] = sorted(model["id"] for model in _ok(owner.get("/reward-models")))
    return found


def _id_for(name: str, shared: Shared) -> str:
    ids = {"trace_id": shared.trace, "annotation_id": shared.annotation, "model_id": shared.model}
    ids |= {"run_id": "no-run-of-anyone", "key_id": shared.key, "task_id": "task", "reviewer": "olivia"}
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
            url = url.replace(f"{{{name}}}", _id_for(name, shared))
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


@pytest.mark.parametrize(
    ("who", "visible"),
    [("rita", True), ("sam", True), ("lara", False), ("vic", False), ("stranger", False)],
    ids=["reviewer of every source", "reviewer of the source", "reviewer of another source", "revoked", "stranger"],
)
def test_every_id_route_as_each_role_is_what_the_role_allows_and_changes_nothing(
    stack: RunningStack, users: dict[str, httpx.Client], shared: Shared, who: str, visible: bool
) -> None:
    before = snapshot(users["olivia"], shared)

    statuses = walk(users[who], stack, shared)

    assert len(statuses) >= 15, sorted(statuses)
    assert _outcomes(statuses) == _expected(statuses, visible)
    assert snapshot(users["olivia"], shared) == before


def test_the_owner_lists_changes_and_revokes_grants(users: dict[str, httpx.Client], shared: Shared) -> None:
    owner = users["olivia"]
    grants = {grant["reviewer_name"]: grant for grant in _ok(owner.get("/reviewers"))}

    assert {name: (g["all_sources"], g["source_ids"]) for name, g in grants.items()} == {
        "rita": (True, []),
        "sam": (False, [SHOP]),
        "lara": (False, [LAB]),
    }
    assert _ok(owner.put("/reviewers/lara", json={"source_ids": [LAB, SHOP]}))["source_ids"] == [LAB, SHOP]
    assert _ok(users["lara"].get(f"/traces/{shared.trace}"))["id"] == shared.trace
    _ok(owner.put("/reviewers/lara", json={"source_ids": [LAB]}))
    assert users["lara"].get(f"/traces/{shared.trace}").status_code == 404
    unknown = owner.put("/reviewers/nobody", json={})
    assert unknown.status_code == 404 and "nobody" in unknown.text
    itself = owner.put("/reviewers/olivia", json={})
    assert itself.status_code == 422 and "another user" in itself.text
    refused = users["rita"].get("/reviewers")
    assert _ok(refused) == []


def test_the_shared_list_has_the_owner_filters_paging_and_sorting(
    users: dict[str, httpx.Client], shared: Shared
) -> None:
    reviewer = users["rita"]

    listed = _ok(reviewer.get("/shared/traces"))
    assert listed["total"] == 2
    assert {(t["id"], t["owner_name"], t["source_name"]) for t in listed["traces"]} == {
        (shared.trace, "olivia", "Olivia's shop"),
        (shared.lab_trace, "olivia", LAB),
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
    assert [(o["owner_name"], o["all_sources"]) for o in owners] == [("olivia", True)]
    assert _ok(reviewer.get("/traces"))["total"] == 0


def test_a_reviewer_annotates_and_the_owner_sees_and_exports_the_author(
    users: dict[str, httpx.Client], shared: Shared
) -> None:
    reviewer, owner = users["sam"], users["olivia"]
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

    assert (mine["author_name"], edited["comment"]) == ("sam", "no refund policy check")
    assert (flagged["label_error"], flagged["author_name"]) == (True, "olivia")
    assert detail["reviewing"] is True and detail["scores"] == [] and detail["source_name"] == "Olivia's shop"
    assert {a["author_name"] for a in detail["annotations"]} == {"olivia", "sam"}
    exported = [orjson.loads(line) for line in owner.get("/export/annotations").text.splitlines()]
    by_author = {line["author_name"]: line for line in exported}
    assert by_author["sam"]["author_id"] == _ok(reviewer.get("/me"))["user_id"]
    assert by_author["sam"]["comment"] == "no refund policy check"
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
    key = stack.create_user("cli-owner")
    env = {**stack.env, "STASH_API_KEY": key}

    added = stash_rm("reviewers", "add", "rita", "--source", SHOP, "--source", LAB, env=env)
    listed = stash_rm("reviewers", "list", env=env)
    removed = stash_rm("reviewers", "remove", "rita", env=env)
    again = stash_rm("reviewers", "remove", "rita", env=env)

    assert added.returncode == 0 and "rita now reviews lab, shop" in added.stdout, added.stderr
    assert listed.returncode == 0 and "rita" in listed.stdout and "lab, shop" in listed.stdout
    assert removed.returncode == 0 and "no longer reviews" in removed.stdout
    assert again.returncode == 1 and "HTTP 404" in again.stderr
