"""The GEPA screens in a real browser: start a run from a trained model, follow it, read its skills and diffs.

The task and reflection models are the stand-in OpenAI-protocol server (tests/fakes/llm_server.py), as in
tests/e2e/test_rest_gepa.py: the task model answers well only when the skill tells it to give the refund
reference number, and the reflection model proposes a body that does.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from fakes.llm_server import FakeLLM
from playwright.sync_api import Page, Route, expect

from support.browser import screenshot, sign_in
from support.stack import RunningStack, running_stack

WAIT_S = 300
TASK, REFLECTION = "openai/stand-in-task", "openai/stand-in-reflection"
WINNING_RULE = "Always give the customer the refund reference number."
# Below V + 3(R + V) for six examples (V = 2, R = 3): GEPA warns it can propose one candidate at most.
SMALL_BUDGET = 12


def _reply(order: str, good: bool) -> str:
    if good:
        return f"Your refund for order {order} is approved. Your refund reference number is R-{order}-77."
    return f"Sorry, I cannot help with order {order}. Please contact someone else."


def _stand_in(path: str, body: dict[str, Any]) -> str:
    messages = body["messages"]
    if body["model"] == "stand-in-reflection":
        if messages[-1]["content"].startswith("You name a skill"):
            return '{"name": "refund-desk", "description": "Use when a customer asks for a refund of an order."}'
        return f"```markdown\n# Refunds\n\n1. Approve the refund the customer asked for.\n2. {WINNING_RULE}\n```"
    found = re.search(r"order (\d+)", messages[-1]["content"])
    return _reply(found.group(1) if found else "0", "reference number" in messages[0]["content"])


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    fake = FakeLLM().start()
    fake.reply = _stand_in
    yield fake
    fake.stop()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, llm: FakeLLM) -> Iterator[RunningStack]:
    with running_stack(
        tmp_path_factory.mktemp("ui-skills"),
        STASH_TRAINER_MAX_LENGTH="128",
        STASH_TRAINER_DEVICE="cpu",
        STASH_GEPA_REFLECTION_API_BASE=f"{llm.url}/v1",
        STASH_GEPA_MAX_LENGTH="128",
        STASH_SCORER_DEBOUNCE_S="3600",
    ) as running:
        yield running


def _finished(client: httpx.Client, path: str) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        found = client.get(path).json()
        if found["status"] in ("succeeded", "failed"):
            return dict(found)
        time.sleep(0.5)
    raise TimeoutError(f"{path} did not finish within {WAIT_S}s")


def _trained(client: httpx.Client, name: str, orders: range, epochs: int) -> dict[str, Any]:
    """A model trained on rated refund replies, one trace per order: those with a reference number +, refusals −."""
    trace_ids = []
    for number in orders:
        order, good = str(number), number % 2 == 0
        steps = [
            {"role": "system", "content": "You are the support agent of an online shop."},
            {"role": "user", "content": f"I want a refund for order {order}"},
            {"role": "assistant", "content": _reply(order, good)},
        ]
        data = orjson.dumps({"id": f"refund-{order}", "steps": steps}).decode()
        trace_id = client.post("/traces/import", json={"format": "stash", "data": data}).json()["trace_ids"][0]
        reply = client.get(f"/traces/{trace_id}").json()["steps"][2]
        rated = client.post(
            f"/traces/{trace_id}/annotations", json={"step_id": reply["id"], "rating": 1 if good else -1}
        )
        assert rated.status_code == 201, rated.text
        trace_ids.append(trace_id)
    created = client.post("/reward-models", json={"name": name, "trace_ids": trace_ids, "epochs": epochs})
    trained = _finished(client, f"/reward-models/{created.json()['id']}")
    assert trained["status"] == "succeeded", trained["error"]
    return trained


@pytest.fixture(scope="module")
def model(stack: RunningStack, alice_key: str) -> dict[str, Any]:
    """A model trained on six rated refund replies."""
    with stack.client(alice_key) as client:
        return _trained(client, "refunds", range(1100, 1106), epochs=3)


def test_a_run_started_from_a_model_shows_scores_candidates_and_the_skill(
    page: Page, stack: RunningStack, alice_key: str, llm: FakeLLM, model: dict[str, Any]
) -> None:
    sign_in(page, alice_key)
    page.goto(f"/models/{model['id']}")
    page.click("#write-skill")
    expect(page.locator("#gepa-model")).to_have_value(model["id"])
    page.fill("#gepa-task-model", TASK)
    page.fill("#gepa-task-base", f"{llm.url}/v1")
    page.fill("#gepa-reflection-model", REFLECTION)
    page.fill("#gepa-calls", str(SMALL_BUDGET))
    page.click("#gepa-submit")

    page.wait_for_url(re.compile(r"/skills/[^/]+$"))
    run_id = page.url.rsplit("/", 1)[1]
    with stack.client(alice_key) as client:
        run = _finished(client, f"/gepa-runs/{run_id}")
        skill = client.get(f"/gepa-runs/{run_id}/skill").text
    assert run["status"] == "succeeded", run["error"]
    assert (run["task_model"], run["max_metric_calls"]) == (TASK, SMALL_BUDGET)

    expect(page.locator("#gepa-status")).to_have_text("succeeded", timeout=10_000)
    expect(page.locator("#skill-name")).to_have_text(run["skill_name"])
    expect(page.locator("#budget-warning")).to_contain_text(run["budget_warning"])
    expect(page.locator("#best-score")).to_contain_text(f"{run['best_score']:.2f}")
    expect(page.locator("#seed-score")).to_have_text(f"{run['seed_score']:.2f}")
    expect(page.locator("#candidates details")).to_have_count(len(run["candidates"]))
    best = page.locator("#candidates details[open]").first
    expect(best.locator(".diff .added").filter(has_text=WINNING_RULE)).to_have_count(1)
    screenshot(page, "skill-run")
    page.click("#theme-toggle")
    screenshot(page, "skill-run-dark")
    with page.expect_download() as download:
        page.click("#download-skill")
    assert download.value.suggested_filename == "SKILL.md"
    assert download.value.path().read_text() == skill

    page.click("a.back")
    expect(page.locator(f"#gepa-runs tr[data-run-id='{run_id}']")).to_contain_text("succeeded")
    screenshot(page, "skill-runs")


def test_the_start_button_says_which_setting_a_default_model_lacks(
    page: Page, alice_key: str, model: dict[str, Any]
) -> None:
    sign_in(page, alice_key)
    page.goto("/skills")

    # This stack serves reflection through STASH_GEPA_REFLECTION_API_BASE, but has no key for the default task model.
    expect(page.locator("#gepa-submit")).to_be_disabled()
    expect(page.locator("#gepa-missing")).to_have_text(
        "No task model: the default, anthropic/claude-haiku-4-5, needs ANTHROPIC_API_KEY in the gepa service's"
        " environment. Name a task model (any LiteLLM model string), or have the operator set ANTHROPIC_API_KEY."
    )
    screenshot(page, "skills-start-missing-key")
    page.fill("#gepa-task-model", TASK)
    expect(page.locator("#gepa-submit")).to_be_enabled()
    expect(page.locator("#gepa-missing")).to_have_text("")


def test_the_start_button_names_what_each_empty_model_field_lacks(
    page: Page, alice_key: str, model: dict[str, Any]
) -> None:
    # This stack's gepa service reflects through STASH_GEPA_REFLECTION_API_BASE; one without it also lacks the key
    # for the default reflection model, which GET /gepa-defaults then says (as default_models' unit test shows).
    def without_reflection_base(route: Route) -> None:
        served = route.fetch()
        route.fulfill(response=served, json={**served.json(), "reflection_model_missing": "ANTHROPIC_API_KEY"})

    page.route("**/gepa-defaults", without_reflection_base)
    sign_in(page, alice_key)
    page.goto("/skills")

    reflection = (
        "No reflection model: the default, anthropic/claude-sonnet-5, needs ANTHROPIC_API_KEY in the gepa service's"
        " environment. Name a reflection model (any LiteLLM model string), or have the operator set ANTHROPIC_API_KEY."
    )
    expect(page.locator("#gepa-submit")).to_be_disabled()
    expect(page.locator("#gepa-missing")).to_contain_text("No task model: the default, anthropic/claude-haiku-4-5,")
    expect(page.locator("#gepa-missing")).to_contain_text(reflection)
    screenshot(page, "skills-start-missing-both")
    page.fill("#gepa-task-model", TASK)
    expect(page.locator("#gepa-missing")).to_have_text(reflection)
    expect(page.locator("#gepa-submit")).to_be_disabled()
    page.fill("#gepa-reflection-model", REFLECTION)
    expect(page.locator("#gepa-submit")).to_be_enabled()
    expect(page.locator("#gepa-missing")).to_have_text("")


def test_a_run_whose_model_was_deleted_offers_no_retry_and_both_are_deleted_from_their_pages(
    page: Page, stack: RunningStack, alice_key: str, model: dict[str, Any]
) -> None:
    page.on("dialog", lambda dialog: dialog.accept())
    with stack.client(alice_key) as client:
        doomed = _trained(client, "short-lived", range(1200, 1204), epochs=1)
        # The default task model lacks its key here: the run fails, and a retry could succeed once it is set.
        created = client.post("/gepa-runs", json={"reward_model_id": doomed["id"], "reflection_model": REFLECTION})
        run = _finished(client, f"/gepa-runs/{created.json()['id']}")
    assert run["status"] == "failed" and run["retryable"], run
    sign_in(page, alice_key)
    page.goto(f"/skills/{run['id']}")
    expect(page.locator("#retry-gepa")).to_be_visible()

    page.goto(f"/models/{doomed['id']}")
    page.click("#delete-model")
    page.wait_for_url(re.compile(r"/models$"))
    page.goto(f"/skills/{run['id']}")
    page.click("#retry-gepa")

    # Retried without its reward model, the run fails for good: the page says so and offers no retry.
    expect(page.locator("#gepa-no-retry")).to_have_text(
        "A retry would fail the same way: start a new run, or delete this one.", timeout=WAIT_S * 1000
    )
    expect(page.locator("#gepa-error-text")).to_have_text(f"reward model {doomed['id']} not found")
    expect(page.locator("#retry-gepa")).to_have_count(0)
    screenshot(page, "skill-run-no-retry")
    page.click("a.back")
    expect(page.locator(f"#gepa-runs tr[data-run-id='{run['id']}']")).to_contain_text("a deleted model")
    page.goto(f"/skills/{run['id']}")
    page.click("#delete-run")
    page.wait_for_url(re.compile(r"/skills$"))
    expect(page.locator(f"#gepa-runs tr[data-run-id='{run['id']}']")).to_have_count(0)
