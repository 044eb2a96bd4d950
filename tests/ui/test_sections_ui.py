"""The section explorer and the completion curve in a real browser: a real Claude Code session's task tree,
keys, the rail and the minimap, scores with their reasons, and the trace view's completion curve.

The fast model is the labeler's real anthropic client talking to the stand-in server, which answers every
requested range with a title, a 0.5 score and its reason (as in tests/e2e/test_rest_sections.py), and
each request's completion with the checkpoints `PLAN` puts on its agent steps.
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
from support.scorer import wait_until
from support.stack import RunningStack, running_stack

# The completion estimates of the first request's checkpoints (None: the model could not tell) and the second's.
PLAN = {"task_1": [0.1, 0.5, None, 0.5, 0.9], "task_2": [0.2, 0.8]}


def _assessed(checkpoints: dict[str, list[dict[str, Any]]], _path: str, body: dict[str, Any]) -> str:
    """Each schema field answered for its bound steps; a plain title for anything else."""
    if not body.get("tools"):
        return "Draft and create beads"
    answer = {}
    for field, schema in body["tools"][0]["input_schema"]["properties"].items():
        bound = {name: schema["properties"][name]["const"] for name in ("first_step_id", "last_step_id")}
        if field.startswith("task_"):
            answer[field] = bound | {"objective": "o", "checkpoints": checkpoints[field]}
            continue
        answer[field] = bound | {
            "title": f"generated {field}",
            "summary": "s",
            "objective": "o",
            "score": 0.5,
            "reason": "r",
        }
    return json.dumps(answer)


def _spaced_agent_steps(steps: list[dict[str, Any]], first: int, last: int, count: int) -> list[int]:
    """`count` agent steps of steps[first..last] with at least one step between each two."""
    chosen: list[int] = []
    for index in range(first, last + 1):
        if steps[index]["role"] == "assistant" and (not chosen or index - chosen[-1] >= 2):
            chosen.append(index)
    assert len(chosen) >= count, "the fixture has too few agent steps for the plan"
    return chosen[:count]


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    server = FakeLLM().start()
    server.reply = lambda path, body: _assessed({}, path, body)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, llm: FakeLLM) -> Iterator[RunningStack]:
    with running_stack(
        tmp_path_factory.mktemp("ui-sections"), STASH_ANTHROPIC_API_KEY="test-key", STASH_ANTHROPIC_BASE_URL=llm.url
    ) as running:
        yield running


@pytest.fixture(scope="module")
def session_trace(stack: RunningStack, alice_key: str, llm: FakeLLM) -> dict[str, Any]:
    """A real Claude Code session of two requests, the first in six progress subtasks, with its sections,
    once scored; `checkpoints` are the step indexes the stand-in puts each planned estimate on."""
    with stack.client(alice_key) as client:
        data = real_fixture("claude-code/spotter-v2.1-task-subagent-parent.jsonl").decode()
        trace_id = client.post("/traces/import", json={"format": "claude_code", "data": data}).json()["trace_ids"][0]

        def scored() -> dict[str, Any] | None:
            found: dict[str, Any] = client.get(f"/traces/{trace_id}").json()
            return found if (found["evaluation"] or {}).get("status") == "succeeded" else None

        trace = wait_until(scored, what="the trace's automatic scores")
        tasks = client.get(f"/traces/{trace_id}/sections").json()["tasks"]
    steps, where = trace["steps"], {step["id"]: index for index, step in enumerate(trace["steps"])}
    indexes = {
        f"task_{number}": _spaced_agent_steps(
            steps, where[task["first_step_id"]], where[task["last_step_id"]], len(PLAN[f"task_{number}"])
        )
        for number, task in enumerate(tasks, 1)
    }
    answers = {
        field: [
            {"step_id": steps[index]["id"], "completion": value, "reason": f"checkpoint {position}"}
            for position, (index, value) in enumerate(zip(indexes[field], PLAN[field], strict=True))
        ]
        for field in indexes
    }
    llm.reply = lambda path, body: _assessed(answers, path, body)
    return {**trace, "tasks": tasks, "checkpoints": indexes}


def _titles(page: Page) -> list[str]:
    return page.locator("#section-list .section-title").all_text_contents()


def _open_explorer(page: Page, alice_key: str, trace: dict[str, Any]) -> None:
    sign_in(page, alice_key)
    page.goto(f"/traces/{trace['id']}/sections")
    expect(page.locator("#section-list .section-row")).to_have_count(len(trace["tasks"]))


def _selected_step(page: Page) -> Any:
    """Expectations about the selected collapsed message row."""
    return expect(page.locator("#section-list .message-row.selected"))


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
    page.locator("#section-list .section-score:text('0.50')").first.hover()
    expect(page.locator("#score-tooltip")).to_be_visible()
    # The pill says what it is before its objective and reason.
    expect(page.locator("#score-tooltip")).to_have_text(
        "Estimated success at this section's own objective, 0–1 (the fast model's estimate; not action credit)"
        "Objective: oWhy: r"
    )
    screenshot(page, "sections-score-reason")
    page.mouse.move(0, 0)
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
    second, third = first_task["children"][1], first_task["children"][2]
    first_step = step_number[second["first_step_id"]]
    # A leaf opens the whole trace at its first step: 28 px message rows, a divider where each section starts.
    _selected_step(page).to_have_attribute("data-step", str(first_step))
    expect(page.locator(f".phase-divider[data-step='{first_step}']")).to_have_text(
        f"{first_task['title']} › {second['title']}"
    )
    expect(page.locator("#breadcrumbs")).to_have_text(
        f"Whole trace › {first_task['title']} › {second['title']}Back to sections"
    )
    expect(page.locator("#breadcrumbs button")).to_have_text(["Whole trace", first_task["title"], "Back to sections"])
    assert page.locator("#section-trace").evaluate("(scroller) => scroller.scrollTop") > 0  # earlier steps above
    selected = page.locator("#section-list .message-row.selected").bounding_box()
    top = page.locator("#section-trace").bounding_box()
    assert selected is not None and top is not None and selected["height"] == 28
    assert 0 <= selected["y"] - top["y"] <= 28  # at the top, below its section's divider
    screenshot(page, "sections-trace")
    page.keyboard.press("ArrowDown")
    _selected_step(page).to_have_attribute("data-step", str(first_step + 1))

    # Scrolling on, the breadcrumb follows the rows into the next section.
    divider = page.locator(f".phase-divider[data-step='{step_number[third['first_step_id']]}']").bounding_box()
    assert divider is not None
    page.locator("#section-trace").hover()
    page.mouse.wheel(0, divider["y"] - top["y"] + 4)
    expect(page.locator("#breadcrumbs .current-section")).to_have_text(third["title"])
    screenshot(page, "sections-trace-scrolled")
    page.click("#back-to-sections")
    expect(page.locator(".section-row.selected .section-title")).to_have_text(third["title"])
    assert _titles(page) == [child["title"] for child in first_task["children"]]
    screenshot(page, "sections-back")

    page.keyboard.press("Enter")
    _selected_step(page).to_have_attribute("data-step", str(step_number[third["first_step_id"]]))
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(rf"\?step={step_number[third['first_step_id']]}$"))
    expect(page.locator(f"#step-{step_number[third['first_step_id']]}")).to_have_class(re.compile("selected"))


def test_a_leading_system_message_stays_with_the_first_request(page: Page, alice_key: str, stack: RunningStack) -> None:
    steps = [
        {"role": "system", "content": "You are the support agent of an online shop."},
        {"role": "user", "content": "Where is my order 1182?"},
        {"role": "assistant", "content": "It was delivered yesterday."},
        {"role": "user", "content": "And order 1183?"},
        {"role": "assistant", "content": "It ships tomorrow."},
    ]
    with stack.client(alice_key) as client:
        data = json.dumps({"id": "leading-system", "title": "Two orders", "steps": steps})
        trace_id = client.post("/traces/import", json={"format": "stash", "data": data}).json()["trace_ids"][0]
    sign_in(page, alice_key)

    page.goto(f"/traces/{trace_id}/sections")

    expect(page.locator("#section-list .section-row")).to_have_count(2)
    assert _titles(page) == ["Where is my order 1182?", "And order 1183?"]
    expect(page.locator("#section-list .section-row").first).to_have_attribute("data-first-step", "1")
    screenshot(page, "sections-leading-system")


def _rail_y(page: Page, index: int, count: int) -> float:
    box = page.locator("#section-rail").bounding_box()
    assert box is not None
    return box["y"] + (index + 0.5) * box["height"] / count


def test_the_rail_opens_any_step_and_its_first_marker_returns_to_the_overview(
    page: Page, alice_key: str, session_trace: dict[str, Any]
) -> None:
    steps, tasks = session_trace["steps"], session_trace["tasks"]
    target = next(i for i, step in enumerate(steps) if step["id"] == tasks[1]["first_step_id"]) + 2
    _open_explorer(page, alice_key, session_trace)
    box = page.locator("#section-rail").bounding_box()
    assert box is not None

    page.mouse.click(box["x"] + box["width"] / 2, _rail_y(page, target, len(steps)))

    expect(page.locator("#breadcrumbs")).to_contain_text(tasks[1]["title"])
    _selected_step(page).to_have_attribute("data-step", str(target + 1))
    expect(page.locator("#section-list")).to_be_focused()
    page.keyboard.press("ArrowDown")
    _selected_step(page).to_have_attribute("data-step", str(target + 2))
    screenshot(page, "sections-rail")
    page.click("#rail-overview")
    expect(page.locator("#breadcrumbs")).to_have_text("Whole trace")
    assert _titles(page) == [task["title"] for task in tasks]


def test_the_rail_ticks_phase_boundaries_more_strongly(
    page: Page, alice_key: str, session_trace: dict[str, Any]
) -> None:
    steps = session_trace["steps"]
    where = {step["id"]: index for index, step in enumerate(steps)}
    sections = [*session_trace["tasks"], *session_trace["tasks"][0]["children"]]
    starts = {where[section["first_step_id"]] for section in sections}
    inside = next(index for index in range(len(steps)) if index not in starts)
    _open_explorer(page, alice_key, session_trace)

    def inked_at_edge(index: int) -> bool:
        """Whether the tick of step `index` reaches near the rail's left edge: its colour differs from between ticks."""
        return page.locator("#section-rail").evaluate(
            "(canvas, [index, count]) => { const r = devicePixelRatio; const c = canvas.getContext('2d');"
            " const slot = canvas.clientHeight / count; const y = Math.floor((index + 0.5) * slot);"
            " const at = (row) => c.getImageData(4 * r, row * r, 1, 1).data.join();"
            " return [-1, 0, 1].some((d) => at(y + d) !== at(Math.floor(index * slot) + 1)); }",
            [index, len(steps)],
        )

    assert all(inked_at_edge(index) for index in starts)
    assert not inked_at_edge(inside)


def test_the_focused_minimap_steps_chronologically_and_keeps_its_keys(
    page: Page, alice_key: str, session_trace: dict[str, Any]
) -> None:
    steps = session_trace["steps"]
    _open_explorer(page, alice_key, session_trace)
    box = page.locator("#sections-minimap").bounding_box()
    assert box is not None
    target = 5

    page.mouse.click(box["x"] + (target + 0.5) * box["width"] / len(steps), box["y"] + box["height"] / 2)

    _selected_step(page).to_have_attribute("data-step", str(target + 1))
    expect(page.locator("#sections-minimap")).to_be_focused()
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    _selected_step(page).to_have_attribute("data-step", str(target + 3))
    page.keyboard.press("ArrowLeft")
    _selected_step(page).to_have_attribute("data-step", str(target + 2))
    # Up/Down belong to the list, not to the focused minimap.
    page.keyboard.press("ArrowDown")
    _selected_step(page).to_have_attribute("data-step", str(target + 2))
    expect(page.locator("#sections-minimap")).to_be_focused()


def _hover_step(page: Page, index: int, count: int) -> str:
    box = page.locator("#minimap").bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + (index + 0.5) * box["width"] / count, box["y"] + box["height"] / 2)
    return page.locator("#minimap-hover").inner_text()


def test_the_completion_curve_names_checkpoints_interpolation_and_breaks(
    page: Page, alice_key: str, session_trace: dict[str, Any]
) -> None:
    count = len(session_trace["steps"])
    first, second = session_trace["checkpoints"]["task_1"], session_trace["checkpoints"]["task_2"]
    sign_in(page, alice_key)
    page.goto(f"/traces/{session_trace['id']}")
    expect(page.locator("#minimap")).to_have_attribute("data-completion-runs", "3")

    assert "completion 10 % (checkpoint: checkpoint 0)" in _hover_step(page, first[0], count)
    between = re.search(r"completion (\d+) % \(interpolated\)", _hover_step(page, first[0] + 1, count))
    assert between is not None and 10 < int(between.group(1)) < 50
    assert "completion" not in _hover_step(page, first[2], count)  # the null estimate breaks the line
    assert "completion" not in _hover_step(page, first[4] + 1, count)  # the next request starts its own line
    assert "completion 80 % (checkpoint: checkpoint 1)" in _hover_step(page, second[1], count)
    screenshot(page, "trace-completion")
    page.click("#minimap-fit")
    page.click("#theme-toggle")
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    screenshot(page, "trace-completion-fit-dark")


def test_the_trace_views_focused_minimap_steps_chronologically(
    page: Page, alice_key: str, session_trace: dict[str, Any]
) -> None:
    count = len(session_trace["steps"])
    sign_in(page, alice_key)
    page.goto(f"/traces/{session_trace['id']}")
    box = page.locator("#minimap").bounding_box()
    assert box is not None

    page.mouse.click(box["x"] + 5.5 * box["width"] / count, box["y"] + box["height"] / 2)
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowLeft")

    expect(page.locator("#minimap")).to_be_focused()
    expect(page.locator("article.step.selected")).to_have_attribute("id", "step-7")
    expect(page.locator("#minimap-hover")).to_have_text(re.compile(r"^Step 7 · "))


def test_the_interpolation_passes_every_checkpoint_without_overshooting(page: Page) -> None:
    page.goto("/")
    checkpoints = [(0, 0.1), (3, 0.9), (5, 0.2), (9, 0.2), (12, 1.0), (13, 0.95)]
    samples = page.evaluate(
        """async (checkpoints) => {
          const { completionRuns, completionAt } = await import("/ui/static/js/completion.js");
          const task = { checkpoints: checkpoints.map(([x, y]) => ({ step_id: `s${x}`, completion: y })) };
          const runs = completionRuns([task], new Map(Array.from({ length: 14 }, (_, x) => [`s${x}`, x])));
          const samples = [];
          for (let i = 0; i <= 260; i += 1) samples.push([i / 20, completionAt(runs, i / 20)]);
          return samples.concat(checkpoints.map(([x]) => [x, completionAt(runs, x)]));
        }""",
        checkpoints,
    )

    for x, point in samples:
        start, end = max(c for c in checkpoints if c[0] <= x), min(c for c in checkpoints if c[0] >= x)
        assert min(start[1], end[1]) - 1e-9 <= point["value"] <= max(start[1], end[1]) + 1e-9, (x, point)
        assert point["interpolated"] == (start[0] != end[0])
        if start[0] == end[0]:
            assert point["value"] == start[1]
    flat = [point["value"] for x, point in samples if 5 <= x <= 9]
    assert flat == pytest.approx([0.2] * len(flat), abs=1e-12)


def test_null_estimates_and_separate_tasks_break_the_curve(page: Page) -> None:
    page.goto("/")
    runs = page.evaluate(
        """async () => {
          const { completionRuns } = await import("/ui/static/js/completion.js");
          const point = (x, y) => ({ step_id: `s${x}`, completion: y });
          const tasks = [
            { checkpoints: [point(0, 0), point(2, 0.4), point(3, null), point(4, 0.5), point(5, 0.6), point(5, 0.7)] },
            { checkpoints: [point(6, 0.1), point(8, 0.3)] },
          ];
          const runs = completionRuns(tasks, new Map(Array.from({ length: 9 }, (_, x) => [`s${x}`, x])));
          return runs.map((run) => run.points.map((p) => [p.x, p.y]));
        }"""
    )

    assert runs == [[[0, 0], [2, 0.4]], [[4, 0.5], [5, 0.7]], [[6, 0.1], [8, 0.3]]]


def test_a_single_task_trace_lands_on_its_steps_with_the_task_as_breadcrumb(
    page: Page, alice_key: str, stack: RunningStack
) -> None:
    steps = [
        {"role": "user", "content": "Rename the config file."},
        {"role": "assistant", "content": "", "tool_name": "bash", "tool_input": {"cmd": "mv a.cfg b.cfg"}},
        {"role": "tool", "content": "ok", "tool_name": "bash"},
        {"role": "assistant", "content": "Renamed."},
    ]
    with stack.client(alice_key) as client:
        data = json.dumps({"title": "One request", "steps": steps})
        trace_id = client.post("/traces/import", json={"format": "stash", "data": data}).json()["trace_ids"][0]
        [task] = client.get(f"/traces/{trace_id}/sections").json()["tasks"]
    sign_in(page, alice_key)

    page.goto(f"/traces/{trace_id}/sections")

    expect(page.locator("#breadcrumbs")).to_have_text(task["title"])
    expect(page.locator("#section-list .message-row")).to_have_count(len(steps))
    expect(page.locator("#back-to-sections")).to_have_count(0)
    page.keyboard.press("ArrowLeft")  # back stops at this overview
    expect(page.locator("#section-list .message-row")).to_have_count(len(steps))
