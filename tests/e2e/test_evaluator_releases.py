"""The shared evaluator's candidates, gate, releases and rollback end to end on the cluster profile: real
processes, real training of three candidates on the packaged MiniLM (one epoch, a few pairs; two of them at
once), the operator's CLI, the scorer scoring with what the trainer published, and the Evaluator page in a real browser.

Alice consents and rates her traces; carol reviews every comparison; the operator freezes a benchmark of two
task groups. The first candidate passes against "no evaluator" and waits for approval; the second is trained
under a policy that asks it to beat the release by a margin no candidate can reach, and is refused with the
reason; the third, under a lenient gate and automatic release, becomes release 2; the operator rolls back.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import orjson
import pytest
from playwright.sync_api import expect, sync_playwright

from support.browser import CHROMIUM, VIEWPORT, screenshot, sign_in
from support.ingest import stash_line
from support.models import new_bucket, offline_training_env
from support.processes import stash_rm
from support.stack import RunningStack, cluster_env, running_stack

TRAINING_WAIT_S = 420
SCORING_WAIT_S = 300
TRACES = 6


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory,
    module_postgres_url: str,
    module_redis_url: str,
    s3_endpoint_url: str,
) -> Iterator[RunningStack]:
    with running_stack(
        tmp_path_factory.mktemp("evaluator-releases"),
        **cluster_env(module_postgres_url, module_redis_url),
        **offline_training_env(new_bucket(s3_endpoint_url, "stash-evaluator-releases"), s3_endpoint_url),
        STASH_SCORER_MAX_LENGTH="128",
        STASH_SCORER_DEBOUNCE_S="1",
    ) as running:
        yield running


def operator(stack: RunningStack, *args: str) -> Any:
    """`stash-rm evaluator ...` as operator ann; its JSON answer."""
    result = stash_rm("evaluator", *args, "--operator", "ann", env=stack.env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def reading(stack: RunningStack, *args: str) -> Any:
    result = stash_rm("evaluator", *args, env=stack.env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def waited(what: str, timeout_s: float, probe: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (found := probe()) is not None:
            return found
        time.sleep(1)
    raise TimeoutError(f"{what} within {timeout_s}s")


def settled(stack: RunningStack, candidate_id: str) -> dict[str, Any]:
    """The candidate once its training ended and the gate decided."""

    def probe() -> dict[str, Any] | None:
        found = next(item for item in reading(stack, "candidates") if item["id"] == candidate_id)
        return found if found["status"] not in ("training", "evaluating") else None

    return waited(f"candidate {candidate_id} was not gated", TRAINING_WAIT_S, probe)


def rated_trace(client: httpx.Client, number: int) -> str:
    """A trace of its own task group whose lookup call is rated + and whose answer is rated −."""
    trace = orjson.loads(stash_line(f"evaluator-release-{number}"))
    trace["steps"][1]["content"] = f"I want a refund for order {2000 + number}"
    body = {"format": "stash", "data": orjson.dumps(trace).decode(), "source_id": "support"}
    trace_id = str(client.post("/traces/import", json=body).json()["trace_ids"][0])
    steps = client.get(f"/traces/{trace_id}").json()["steps"]
    for step, rating in ((steps[2], 1), (steps[4], -1)):
        response = client.post(f"/traces/{trace_id}/annotations", json={"step_id": step["id"], "rating": rating})
        assert response.status_code == 201, response.text
    return trace_id


@pytest.fixture(scope="module")
def alice_key(stack: RunningStack) -> str:
    return stack.create_user("alice")


@pytest.fixture(scope="module")
def alice(stack: RunningStack, alice_key: str) -> Iterator[httpx.Client]:
    with stack.client(alice_key) as client:
        assert client.put("/evaluator/consent", json={"text_version": "v1", "all_sources": True}).is_success
        yield client


@pytest.fixture(scope="module")
def corpus(stack: RunningStack, alice: httpx.Client) -> list[str]:
    """Alice's reviewed traces, two task groups frozen as benchmark core; the trace ids."""
    trace_ids = [rated_trace(alice, number) for number in range(TRACES)]
    with stack.client(stack.create_user("carol")) as carol:
        operator(stack, "reviewers", "add", "carol")
        operator(stack, "policy", "--agreeing-reviews", "1")
        operator(stack, "collect")
        for item in carol.get("/evaluator/review-queue", params={"limit": 50}).json():
            verdict = "better" if "called lookup_order" in item["action_a"] else "worse"
            body = {"comparison_id": item["comparison_id"], "verdict": verdict}
            assert carol.post("/evaluator/reviews", json=body).status_code == 201
    groups = sorted(reading(stack, "stats")["stats"]["admitted_task_groups"])
    frozen = operator(stack, "freeze", "core", "--task-group", groups[0], "--task-group", groups[1])
    assert frozen["size"] >= 2
    return trace_ids


def test_a_candidate_needs_the_operator_and_a_benchmark(stack: RunningStack, alice: httpx.Client) -> None:
    assert alice.get("/evaluator/releases").json() == {"releases": [], "current": None}
    assert httpx.get(f"{stack.gateway_url}/api/v1/admin/evaluator/candidates").status_code == 401
    refused = stash_rm("evaluator", "train", env=stack.env)
    assert refused.returncode == 1 and "freeze a benchmark first" in refused.stderr
    bad = stash_rm("evaluator", "policy", "--epochs", "0", env=stack.env)
    assert bad.returncode == 1 and "epochs" in bad.stderr


def test_gated_releases_refusal_and_rollback_with_real_training(
    stack: RunningStack, alice: httpx.Client, corpus: list[str]
) -> None:
    policy = operator(stack, "policy", "--epochs", "1", "--max-pairs", "8", "--primary-benchmark", "core")
    assert (policy["set_by"], policy["policy"]["auto_release"]) == ("ann", False)
    first = operator(stack, "train")
    assert first["status"] == "training" and first["created_by"] == "ann"
    assert [entry["name"] for entry in first["benchmarks"]] == ["core"] and first["snapshot_id"]

    first = settled(stack, first["id"])
    assert first["status"] == "awaiting_approval", first
    assert first["gate"] == {"passed": True, "compared_with": None, "reasons": []}
    (report,) = first["report"]
    assert report["n"] >= 2 and report["low"] <= report["accuracy"] <= report["high"]
    assert set(report["slices"]) == {"action_type", "source_format", "owner"}
    release = operator(stack, "approve", first["id"])
    assert (release["number"], release["released_by"], release["current"]) == (1, "ann", True)

    operator(stack, "policy", "--margin", "1.0")  # no candidate beats the release by a whole accuracy point
    strict = operator(stack, "train")
    operator(stack, "policy", "--margin", "-1.0", "--slice-tolerance", "1.0", "--auto-release")
    lenient = operator(stack, "train")
    strict, lenient = settled(stack, strict["id"]), settled(stack, lenient["id"])

    assert strict["status"] == "refused" and strict["gate"]["passed"] is False
    assert "on core v1 accuracy" in strict["reason"] and "plus the margin 1" in strict["reason"]
    refused = stash_rm("evaluator", "approve", strict["id"], env=stack.env)
    assert refused.returncode == 1 and "only a candidate awaiting approval" in refused.stderr
    assert lenient["status"] == "released" and lenient["gate"] == {"passed": True, "compared_with": 1, "reasons": []}

    public = alice.get("/evaluator/releases").json()
    assert public["current"] == 2 and [item["number"] for item in public["releases"]] == [2, 1]
    assert public["releases"][0]["released_by"] == "gate" and "accuracy" in public["releases"][0]["notes"]
    assert set(public["releases"][0]["report"][0]["slices"]) == {"action_type", "source_format"}
    waited("the scorer acknowledged release 2", 60, lambda: _published(alice, 2))
    scored = waited("a trace scored by release 2", SCORING_WAIT_S, lambda: _scored(alice, corpus[0], 2))
    assert scored["current_release"] == 2 and scored["action_scores"]

    scorer = stack.pid("scorer")
    os.kill(scorer, signal.SIGSTOP)  # the scorer stops answering: the rollback waits for it, and is not lost
    try:
        rolled = operator(stack, "rollback", "1")
        assert (rolled["number"], rolled["current"], rolled["published"]) == (1, True, False)
        time.sleep(2)
        assert alice.get("/evaluator/releases").json()["releases"][1]["published"] is False
    finally:
        os.kill(scorer, signal.SIGCONT)
    waited("the scorer acknowledged the rollback", 120, lambda: _published(alice, 1))
    shared = waited("release 1 current at the scorer", 60, lambda: _current_at_scorer(alice, corpus[0], 1))
    assert shared["current_release"] == 1
    actions = [item["action"] for item in reading(stack, "actions")]
    assert {"set_training_policy", "train_candidate", "release", "rollback"} <= set(actions)


def test_the_evaluator_page_shows_releases_to_everyone_and_candidates_to_the_operator(
    stack: RunningStack, alice_key: str, corpus: list[str]
) -> None:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_context(base_url=stack.gateway_url, viewport=VIEWPORT).new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        sign_in(page, alice_key)
        page.click("nav a:text('Shared evaluator')")
        expect(page.locator("#evaluator-releases article.release")).to_have_count(2)
        expect(page.locator("article.release[data-release='1'] .current-release")).to_be_visible()
        expect(page.locator("article.release[data-release='2'] .release-notes")).to_contain_text("accuracy")
        expect(page.locator("#evaluator-releases table.evaluator-report").first).to_contain_text("core v1")
        screenshot(page, "evaluator-releases")

        page.fill("#admin-key", "not-the-key")
        page.click("#operator-show")
        expect(page.locator("#evaluator-operator .form-error")).to_contain_text("invalid admin key")
        page.fill("#admin-key", stack.env["STASH_ADMIN_KEY"])
        page.click("#operator-show")
        expect(page.locator("#corpus-stats")).to_contain_text("admitted")
        expect(page.locator("#evaluator-operator .form-error")).to_be_empty()
        expect(page.locator("article.candidate")).to_have_count(3)
        expect(page.locator("article.candidate-refused .gate-decision")).to_contain_text("plus the margin 1")
        released = page.locator("article.candidate-released .gate-decision")  # newest first
        expect(released).to_contain_text(["against release 1", "against no evaluator"])
        page.locator("#evaluator-operator").scroll_into_view_if_needed()
        screenshot(page, "evaluator-candidates")
        browser.close()
    assert not errors, errors


def _published(client: httpx.Client, number: int) -> bool | None:
    releases = client.get("/evaluator/releases").json()["releases"]
    return True if any(item["number"] == number and item["published"] for item in releases) else None


def _scored(client: httpx.Client, trace_id: str, release: int) -> dict[str, Any] | None:
    shared = client.get(f"/traces/{trace_id}").json()["shared_evaluator"]
    return dict(shared) if shared["release"] == release else None


def _current_at_scorer(client: httpx.Client, trace_id: str, release: int) -> dict[str, Any] | None:
    shared = client.get(f"/traces/{trace_id}").json()["shared_evaluator"]
    return dict(shared) if shared["current_release"] == release else None
