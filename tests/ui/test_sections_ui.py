"""The section explorer in a real browser: a real Claude Code session's task tree, keys, scores, and back to the trace.

The fast model is the labeler's real anthropic client talking to the stand-in server, which answers every
requested range with a title, a 0.5 score and its reason (as in tests/e2e/test_rest_sections.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from fakes.llm_server import FakeLLM
from playwright.sync_api import Page, expect

from support.browser import screenshot, sign_in
from support.fixtures import real_fixture
from support.stack import RunningStack, running_stack


def _assessed(_path: str, body: dict[str, Any]) -> str:
    """Each range's schema field answered for its bound steps; a plain title for anything else."""
    if not body.get("tools"):
        return "Draft and create beads"
    answer = {}
    for field, schema in body["tools"][0]["input_schema"]["properties"].items():
        bound = {name: schema["properties"][name]["const"] for name in ("first_step_id", "last_step_id")}
        answer[field] = bound | {
            "title": f"generated {field}",
            "summary": "s",
            "objective": "o",
            "score": 0.5,
            "reason": "r",
        }
    return json.dumps(answer)


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    server = FakeLLM().start()
    server.reply = _assessed
    yield server
    server.stop()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, llm: FakeLLM) -> Iterator[RunningStack]:
    with running_stack(
        tmp_path_factory.mktemp("ui-sections"), STASH_ANTHROPIC_API_KEY="test-key", STASH_ANTHROPIC_BASE_URL=llm.url
    ) as running:
        yield running


@pytest.fixture(scope="module")
def session_trace(stack: RunningStack, alice_key: str) -> dict[str, Any]:
    """A real Claude Code session of two requests, the first in six progress subtasks, with its sections."""
    with stack.client(alice_key) as client:
        data = real_fixture("claude-code/spotter-v2.1-task-subagent-parent.jsonl").decode()
        trace_id = client.post("/traces/import", json={"format": "claude_code", "data": data}).json()["trace_ids"][0]
        trace = client.get(f"/traces/{trace_id}").json()
        return {**trace, "tasks": client.get(f"/traces/{trace_id}/sections").json()["tasks"]}


def _titles(page: Page) -> list[str]:
    return page.locator("#section-list .section-title").all_text_contents()


def test_the_explorer_walks_the_task_tree_with_keys_and_opens_a_step(
    page: Page, alice_key: str, session_trace: dict[str, Any]
) -> None:
    tasks = session_trace["tasks"]
    first_task = tasks[0]
    step_number = {step["id"]: index + 1 for index, step in enumerate(session_trace["steps"])}
    sign_in(page, alice_key)
    page.goto(f"/traces/{session_trace['id']}")
    page.click("#open-sections")

    expect(page.locator("#section-list .section-row")).to_have_count(len(tasks))
    assert _titles(page) == [task["title"] for task in tasks]
    graded = [task for task in tasks if task["graded"]]
    expect(page.locator("#section-list .section-score:text('0.50')")).to_have_count(len(graded))
    score = page.locator("#section-list .section-score:text('0.50')").first
    expect(score).to_have_attribute("title", "o\nr")
    page.keyboard.press("ArrowDown")
    expect(page.locator(".section-row.selected .section-title")).to_have_text(tasks[1]["title"])
    page.keyboard.press("ArrowUp")

    page.keyboard.press("ArrowRight")
    expect(page.locator("#breadcrumbs")).to_contain_text(first_task["title"])
    expect(page.locator("#section-list .section-row")).to_have_count(len(first_task["children"]))
    assert _titles(page) == [child["title"] for child in first_task["children"]]
    graded_children = [child for child in first_task["children"] if child["graded"]]
    expect(page.locator("#section-list .section-score:text('0.50')")).to_have_count(len(graded_children))
    page.keyboard.press("ArrowDown")
    screenshot(page, "sections")
    page.keyboard.press("ArrowLeft")
    expect(page.locator(".section-row.selected .section-title")).to_have_text(first_task["title"])

    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    second = first_task["children"][1]
    page.wait_for_url(re.compile(rf"\?step={step_number[second['first_step_id']]}$"))
    expect(page.locator(f"#step-{step_number[second['first_step_id']]}")).to_have_class(re.compile("selected"))
