"""The shared evaluator's page in a real browser on both profiles: consent given and revoked, and the independent
review queue."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import orjson
import pytest
from playwright.sync_api import Page, expect

from support.browser import screenshot, sign_in, sign_out
from support.ingest import stash_line
from support.models import new_bucket, offline_training_env
from support.processes import stash_rm
from support.stack import RunningStack, cluster_env, running_stack


@pytest.fixture(scope="module", params=["embedded", "cluster"])
def profile(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def stack(
    profile: str, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[RunningStack]:
    """The session's embedded stack (users named for this module), or a cluster-profile stack of the module's own:
    the evaluator's reviewers, review policy and corpus are one per stack, and the session's cluster stack is shared
    with modules whose accounts consent."""
    if profile == "embedded":
        yield request.getfixturevalue("embedded_stack").for_module("evaluator_ui")
        return
    endpoint = request.getfixturevalue("s3_endpoint_url")
    env = {
        **cluster_env(request.getfixturevalue("module_postgres_url"), request.getfixturevalue("module_redis_url")),
        **offline_training_env(new_bucket(endpoint, "stash-evaluator-ui"), endpoint),
    }
    with running_stack(tmp_path_factory.mktemp("evaluator-ui-cluster"), **env) as running:
        yield running


def _rated_trace(client: httpx.Client) -> str:
    trace = orjson.loads(stash_line())
    body = {"format": "stash", "data": orjson.dumps(trace).decode(), "source_id": "support"}
    trace_id = client.post("/traces/import", json=body).json()["trace_ids"][0]
    steps = client.get(f"/traces/{trace_id}").json()["steps"]
    for step, rating in ((steps[2], 1), (steps[4], -1)):
        assert client.post(f"/traces/{trace_id}/annotations", json={"step_id": step["id"], "rating": rating}).is_success
    return trace_id


def _operator(stack: RunningStack, *args: str) -> None:
    result = stash_rm("evaluator", *args, env=stack.env)
    assert result.returncode == 0, result.stderr


def test_consent_then_an_independent_review_in_the_browser(
    page: Page, stack: RunningStack, profile: str, alice_key: str, bob_key: str
) -> None:
    trace_id = _rated_trace(stack.client(alice_key))
    sign_in(page, alice_key)
    page.click("nav a:text('Shared evaluator')")
    expect(page.locator("#consent-status")).to_contain_text("Not sharing")
    expect(page.locator("#no-release")).to_contain_text("No shared evaluator released yet")
    expect(page.locator("#not-reviewer")).to_contain_text("only evaluator reviewers")
    page.click("#consent-grant")
    expect(page.locator("#consent-status")).to_contain_text("Sharing all your traces")
    screenshot(page, f"evaluator-consent-{profile}")

    for name in ("alice", "bob"):
        _operator(stack, "reviewers", "add", name + stack.user_suffix)
    _operator(stack, "policy", "--agreeing-reviews", "1")
    _operator(stack, "collect")
    page.reload()
    expect(page.locator("#queue-empty")).to_contain_text("Nothing to review")

    sign_out(page)
    sign_in(page, bob_key)
    page.goto("/evaluator")
    card = page.locator("article.comparison")
    expect(card).to_have_count(1)
    expect(card.locator(".comparison-context").first).to_contain_text("System: You are a support agent.")
    expect(card.locator(".comparison-action")).to_have_count(2)
    expect(page.locator("#review-queue .hint")).to_contain_text("each after the conversation that led up to it")
    assert trace_id not in card.inner_text()
    screenshot(page, f"evaluator-review-queue-{profile}")
    card.locator(".review-note").fill("the lookup comes first")
    card.locator(".verdict-a-better").click()
    expect(card).to_contain_text("Recorded")
    screenshot(page, f"evaluator-reviewed-{profile}")

    page.reload()
    expect(page.locator("#queue-empty")).to_be_visible()
    sign_out(page)
    sign_in(page, alice_key)
    page.goto("/evaluator")
    expect(page.locator("#consent-contributed")).to_contain_text("1 comparison came from your data")
    page.click("#consent-revoke")
    expect(page.locator("#consent-status")).to_contain_text("you stopped on")
    screenshot(page, f"evaluator-revoked-{profile}")
