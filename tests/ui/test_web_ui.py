"""The web UI in a real browser against a real stack: sign in, import, read, annotate, themes, access."""

from __future__ import annotations

import re
import time
from typing import Any

import httpx
import orjson
import pytest
from playwright.sync_api import Page, expect

from support.browser import screenshot, sign_in, sign_out, signed
from support.fixtures import REAL_FIXTURES
from support.ingest import stash_line
from support.long_trace import long_trace_line
from support.processes import stash_rm
from support.stack import RunningStack

# A real Claude Code subagent transcript whose file reads thrash (context_thrash over steps 3–12).
FIXTURE = REAL_FIXTURES / "claude-code" / "spotter-v2.1-sidechain-agent-a2898e3.jsonl"
WAIT_S = 30


def _evaluated(client: httpx.Client, trace_id: str) -> dict[str, Any]:
    """The trace once its automatic labels and scores are in."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        detail = client.get(f"/traces/{trace_id}").json()
        if (detail["evaluation"] or {}).get("status") == "succeeded":
            return detail
        time.sleep(0.1)
    raise TimeoutError(f"trace {trace_id} was not evaluated within {WAIT_S}s")


@pytest.fixture(scope="module")
def alice(stack: RunningStack, alice_key: str) -> httpx.Client:
    with stack.client(alice_key) as client:
        yield client


@pytest.fixture(scope="module")
def imported(browser, stack: RunningStack, alice_key: str, alice: httpx.Client) -> dict[str, Any]:
    """The fixture imported through the Import dialog, as the API then shows it (evaluated)."""
    context = browser.new_context(base_url=stack.gateway_url)
    page = context.new_page()
    sign_in(page, alice_key)
    page.click("#open-import")
    page.set_input_files("#import-file", str(FIXTURE))
    page.select_option("#import-format", "claude_code")
    page.fill("#import-source", "spotter")
    page.click("#import-submit")
    page.wait_for_url("**/traces/*")
    trace_id = page.url.rsplit("/", 1)[1]
    # Opened before the labeler finished: the view picks up the outcome by itself.
    expect(page.locator("#trace-outcome")).to_have_text("insufficient evidence", timeout=WAIT_S * 1000)
    context.close()
    return _evaluated(alice, trace_id)


@pytest.fixture(scope="module")
def answered(alice: httpx.Client) -> dict[str, Any]:
    """A support trace whose answer the user accepted, so its task is scored (imported through the API)."""
    trace = orjson.loads(stash_line("accepted-refund"))
    trace["steps"].append({"role": "user", "content": "Great, thanks a lot!"})
    response = alice.post("/traces/import", json={"format": "stash", "data": orjson.dumps(trace).decode()})
    assert response.status_code == 200, response.text
    return _evaluated(alice, response.json()["trace_ids"][0])


def test_the_imported_trace_shows_its_scores_patterns_and_every_step(
    page: Page, alice_key: str, imported: dict[str, Any]
) -> None:
    sign_in(page, alice_key)
    page.goto(f"/traces/{imported['id']}")

    expect(page.locator("#trace-title")).to_have_text(imported["title"])
    expect(page.locator("#trace-score")).to_have_text(
        f"automatic trace score {signed(imported['evaluation']['score'])}"
    )
    expect(page.locator("#trace-outcome")).to_have_text(imported["evaluation"]["outcome"].replace("_", " "))
    card = page.locator("#patterns .pattern-card")
    expect(card).to_have_count(1)
    expect(card).to_contain_text("context_thrash")
    expect(card).to_contain_text("steps 3–12")
    expect(page.locator(".pattern-banner")).to_contain_text("context_thrash")
    expect(page.locator("#step-1 .gutter")).to_have_text("1")
    expect(page.locator("#minimap-fixed")).to_have_attribute("aria-pressed", "true")
    box = page.locator("#minimap").bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + 2, box["y"] + box["height"] / 2)
    expect(page.locator("#minimap-hover")).to_have_text(re.compile(r"^Step 1 · .* · Very thorough exploration.* · "))
    scored = next(index for index, step in enumerate(imported["steps"]) if step["metadata"].get("reward"))
    reward = imported["steps"][scored]["metadata"]["reward"]
    assert reward["expected_credit"] is not None  # the rule scores' anchored distribution gives one
    chip = page.locator(f"#step-{scored + 1} .score-chip")
    # The pill says what it is: the expected credit, with its meaning on hover.
    expect(chip).to_have_text(f"credit {signed(reward['expected_credit'])}")
    expect(chip).to_have_attribute("title", re.compile(r"^Automatic credit \(−1…\+1\): the expected credit"))
    expect(page.locator("#minimap-legend")).to_contain_text("Bars: automatic credit, −1…+1 on the left axis")
    expect(page.locator("#minimap-legend")).to_contain_text("positive")
    chip.click()
    expect(page.locator(f"#step-{scored + 1} .breakdown")).to_contain_text("score (−1..+1)")
    expect(page.locator(f"#step-{scored + 1} .breakdown")).to_contain_text("expected credit (shown)")
    screenshot(page, "trace-light")


def test_the_credit_graph_is_left_out_when_no_action_has_a_grade(
    page: Page, alice_key: str, alice: httpx.Client, imported: dict[str, Any]
) -> None:
    steps = [{"role": "system", "content": "You are helpful."}, {"role": "user", "content": "Just saying hello."}]
    response = alice.post("/traces/import", json={"format": "stash", "data": orjson.dumps({"steps": steps}).decode()})
    assert response.status_code == 200, response.text
    ungraded = _evaluated(alice, response.json()["trace_ids"][0])
    assert not any(step["metadata"].get("reward") for step in ungraded["steps"])
    sign_in(page, alice_key)

    page.goto(f"/traces/{ungraded['id']}")
    expect(page.locator("#step-2")).to_be_visible()
    expect(page.locator("#minimap-bar")).to_be_hidden()
    page.goto(f"/traces/{imported['id']}")
    expect(page.locator("#minimap-bar")).to_be_visible()


def test_a_scored_task_gets_its_card_before_its_first_step(
    page: Page, alice_key: str, answered: dict[str, Any]
) -> None:
    task = answered["step_scores"][0]
    first = next(index for index, step in enumerate(answered["steps"]) if step["id"] == task["first_step_id"])
    last = next(index for index, step in enumerate(answered["steps"]) if step["id"] == task["last_step_id"])
    sign_in(page, alice_key)
    page.goto(f"/traces/{answered['id']}")

    card = page.locator(f"#step-{first + 1} .task-card")
    expect(card).to_contain_text(f"steps {first + 1}–{last + 1}")
    expect(card.locator(".task-score")).to_have_text(signed(task["score"]))
    expect(card).to_contain_text(f"Final answer{signed(task['answer_points'])}")
    expect(card).to_contain_text(f"Total work{signed(task['work_cost'])}")


def test_imported_supervision_shows_as_imported_beside_the_rule_scores(
    page: Page, alice_key: str, alice: httpx.Client
) -> None:
    trace = orjson.loads(stash_line("imported-supervision"))
    trace["steps"].append({"role": "user", "content": "Great, thanks a lot!"})
    trace["metadata"] = {"step_scores": [{"task_id": "refund", "score": 0.75}]}
    terms = [{"reason": "grader: refund started correctly", "points": 0.5}]
    trace["steps"][4]["metadata"] = {"reward": {"score": 0.5, "terms": terms}}
    response = alice.post("/traces/import", json={"format": "stash", "data": orjson.dumps(trace).decode()})
    assert response.status_code == 200, response.text
    detail = _evaluated(alice, response.json()["trace_ids"][0])
    rule = detail["steps"][4]["metadata"]["rule_reward"]
    sign_in(page, alice_key)

    page.goto(f"/traces/{detail['id']}")

    expect(page.locator("#imported-task-scores")).to_have_text("imported task scores +0.75")
    expect(page.locator("#trace-score")).to_have_text(f"automatic trace score {signed(detail['evaluation']['score'])}")
    expect(page.locator("#step-5 .score-chip.imported")).to_have_text("imported +0.50")
    rule_chip = page.locator("#step-5 button.score-chip")
    expect(rule_chip).to_have_text(f"credit {signed(rule['expected_credit'])}")
    rule_chip.click()
    breakdown = page.locator("#step-5 .breakdown")
    expect(breakdown).to_contain_text("answer accepted (confident)")
    expect(breakdown).to_contain_text("imported: grader: refund started correctly")
    expect(breakdown).to_contain_text("imported score")
    # The rule task card stays where the task starts.
    expect(page.locator(".task-card").first).to_contain_text("Final answer")
    screenshot(page, "trace-imported-supervision")


def test_list_shows_the_trace_with_source_score_and_counts(
    page: Page, alice_key: str, alice: httpx.Client, imported: dict[str, Any]
) -> None:
    sign_in(page, alice_key)

    row = page.locator(f"tr[data-trace-id='{imported['id']}']")
    expect(row).to_contain_text(imported["title"][:30])
    expect(row).to_contain_text("spotter")
    expect(row).to_contain_text(str(imported["step_count"]))
    expect(row).to_contain_text(signed(imported["evaluation"]["score"]))
    expect(row.locator(".pattern-cell .pattern-chip")).to_have_text(
        [pattern["pattern"] for pattern in sorted(imported["process_patterns"], key=_first_step)]
    )
    page.select_option("#filter-pattern", "context_thrash")
    expect(page.locator(f"tr[data-trace-id='{imported['id']}']")).to_contain_text("context_thrash")
    page.select_option("#filter-pattern", "stuck_on_test")
    expect(page.locator(".empty")).to_be_visible()
    page.select_option("#filter-pattern", "")
    page.select_option("#filter-source", "spotter")
    expect(page.locator("#page-range")).to_have_text("1–1 of 1")
    expect(page.locator("#rename-source")).to_be_visible()
    page.select_option("#filter-source", "")
    expect(page.locator("#trace-table tbody tr")).to_have_count(alice.get("/traces").json()["total"])
    screenshot(page, "list")


def _first_step(pattern: dict[str, Any]) -> tuple[int, str]:
    return pattern["first_step_index"], pattern["pattern"]


def test_the_source_header_sorts_every_page_through_the_api(
    page: Page, alice_key: str, alice: httpx.Client, imported: dict[str, Any], answered: dict[str, Any]
) -> None:
    sign_in(page, alice_key)
    rows = page.locator("#trace-table tbody tr")

    page.click("#sort-source")
    expect(page.locator("#trace-table th[aria-sort='ascending']")).to_be_visible()
    ascending = [trace["id"] for trace in alice.get("/traces", params={"sort": "source"}).json()["traces"]]
    expect(rows).to_have_count(len(ascending))
    assert [row.get_attribute("data-trace-id") for row in rows.all()] == ascending
    page.click("#sort-source")
    descending = [trace["id"] for trace in alice.get("/traces", params={"sort": "-source"}).json()["traces"]]
    expect(page.locator("#trace-table th[aria-sort='descending']")).to_be_visible()
    assert [row.get_attribute("data-trace-id") for row in rows.all()] == descending
    assert ascending != descending


def test_a_source_is_renamed_from_the_list(
    page: Page, alice_key: str, alice: httpx.Client, imported: dict[str, Any]
) -> None:
    sign_in(page, alice_key)
    page.locator(f"tr[data-trace-id='{imported['id']}'] .chip").click()
    page.fill("#rename-source", "Spotter subagents")
    page.click("form.rename button[type=submit]")

    expect(page.locator(f"tr[data-trace-id='{imported['id']}'] .chip")).to_have_text("Spotter subagents")
    sources = {item["source_id"]: item["name"] for item in alice.get("/trace-sources").json()}
    assert sources["spotter"] == "Spotter subagents"


def _quote_of(content: str, start: int, end: int) -> dict[str, str]:
    """The quote the UI sends for content[start:end]: the text with 40 characters either side."""
    prefix, suffix = content[max(0, start - 40) : start], content[end : end + 40]
    return {"text": content[start:end], "prefix": prefix, "suffix": suffix}


def _drag_select(page: Page, step_id: str, start: int, end: int) -> None:
    """Select content[start:end] of a step with the mouse, from the first character's left edge to
    the last one's right edge, as a person would. It aims once the page's requests have settled: a panel drawn
    from a late answer (scores, sections, credit) moves the text between aim and drag."""
    page.wait_for_selector(f".content[data-step-id='{step_id}']")
    page.wait_for_load_state("networkidle")
    points = page.evaluate(
        """([stepId, start, end]) => {
            const box = document.querySelector(`.content[data-step-id="${stepId}"]`);
            const walker = document.createTreeWalker(box, NodeFilter.SHOW_TEXT);
            const rectOf = (offset) => {
                let seen = 0;
                for (let node = walker.nextNode(); node; node = walker.nextNode()) {
                    if (offset < seen + node.data.length) {
                        const range = document.createRange();
                        range.setStart(node, offset - seen);
                        range.setEnd(node, offset - seen + 1);
                        walker.currentNode = box;
                        return range.getBoundingClientRect();
                    }
                    seen += node.data.length;
                }
                throw new Error(`offset ${offset} is past the content`);
            };
            const first = rectOf(start);
            const last = rectOf(end - 1);
            return [first.left + 1, first.top + first.height / 2, last.right - 1, last.top + last.height / 2];
        }""",
        [step_id, start, end],
    )
    page.mouse.move(points[0], points[1])
    page.mouse.down()
    page.mouse.move(points[2], points[3], steps=8)
    page.mouse.up()


def test_a_selected_quote_is_saved_with_its_rating_and_flagged(
    page: Page, alice_key: str, alice: httpx.Client, imported: dict[str, Any]
) -> None:
    step = imported["steps"][0]
    content = step["content"]
    start = content.index("How `SessionLive`")
    end = start + len("How `SessionLive` and `SubagentLive` currently render transcripts")
    expected = _quote_of(content, start, end)
    sign_in(page, alice_key)
    page.goto(f"/traces/{imported['id']}")
    # The completion estimate arrives after the rows and redraws the legend above them: select only once it
    # has, or the text moves between measuring it and dragging over it.
    expect(page.locator("#minimap-legend")).to_contain_text("Completion curve")

    _drag_select(page, step["id"], start, end)
    page.click("#annotate-selection")
    expect(page.locator("#annotation-quote mark")).to_have_text(expected["text"])
    page.check("#rating-down")
    page.fill("#annotation-comment", "Asks for everything at once")
    screenshot(page, "annotation-dialog")
    page.click("#annotation-save")

    saved = page.locator("#step-1 li.annotation")
    expect(saved).to_contain_text("Asks for everything at once")
    expect(saved.locator(".rating.down")).to_be_visible()
    exported = [orjson.loads(line) for line in alice.get("/export/annotations").text.splitlines()]
    mine = [item for item in exported if item["comment"] == "Asks for everything at once"]
    assert len(mine) == 1
    assert (mine[0]["quote"], mine[0]["rating"], mine[0]["step_index"], mine[0]["label_error"]) == (
        expected,
        -1,
        0,
        False,
    )

    saved.locator("button.flag").click()
    page.fill("#label-error-note", "The request was fine; the label is wrong")
    page.click("#flag-save")

    expect(saved).to_have_class("annotation flagged")
    expect(saved.locator(".flag-note")).to_have_text("Label error: The request was fine; the label is wrong")
    screenshot(page, "trace-annotated")
    flagged = [orjson.loads(line) for line in alice.get("/export/annotations").text.splitlines()]
    assert [item["label_error"] for item in flagged if item["comment"] == "Asks for everything at once"] == [True]


def test_step_and_trace_comments_can_be_edited_and_deleted(
    page: Page, alice_key: str, answered: dict[str, Any], alice: httpx.Client
) -> None:
    page.on("dialog", lambda dialog: dialog.accept())
    sign_in(page, alice_key)
    page.goto(f"/traces/{answered['id']}")

    page.click("#comment-trace")
    page.check("#rating-up")
    page.fill("#annotation-comment", "Solved on the first try")
    page.click("#annotation-save")
    note = page.locator("#trace-annotations li.annotation")
    expect(note).to_contain_text("Solved on the first try")
    note.get_by_role("button", name="Edit").click()
    page.fill("#annotation-comment", "Solved, and politely")
    page.click("#annotation-save")
    expect(note).to_contain_text("Solved, and politely")
    system = page.locator("#step-1")
    system.get_by_role("button", name="Comment").click()
    expect(page.locator("#rating-up")).to_be_disabled()
    expect(page.locator("#annotation-dialog")).to_contain_text("comments only")
    page.fill("#annotation-comment", "Context only")
    page.click("#annotation-save")
    expect(system.locator("li.annotation")).to_contain_text("Context only")
    system.locator("li.annotation").get_by_role("button", name="Delete").click()
    expect(system.locator("li.annotation")).to_have_count(0)

    annotations = alice.get(f"/traces/{answered['id']}").json()["annotations"]
    assert [(item["step_id"], item["rating"], item["comment"]) for item in annotations] == [
        (None, 1, "Solved, and politely")
    ]


def test_the_theme_is_remembered_across_a_reload(page: Page, alice_key: str, imported: dict[str, Any]) -> None:
    sign_in(page, alice_key)
    page.goto(f"/traces/{imported['id']}")
    expect(page.locator("html")).to_have_attribute("data-theme", "light")

    page.click("#theme-toggle")
    page.reload()

    expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    expect(page.locator("#theme-toggle")).to_have_text("☀ Light theme")
    # Warm charcoal surfaces, cream text.
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(31, 28, 25)"
    assert page.evaluate("getComputedStyle(document.body).color") == "rgb(241, 232, 216)"
    expect(page.locator("#step-1")).to_be_visible()
    screenshot(page, "trace-dark")


def test_keys_move_between_steps_open_and_close_messages(page: Page, alice_key: str, imported: dict[str, Any]) -> None:
    sign_in(page, alice_key)
    page.goto(f"/traces/{imported['id']}")
    expect(page.locator("#step-1 .read-more")).to_be_visible()

    page.keyboard.press("ArrowDown")
    expect(page.locator("#step-1")).to_have_class(re.compile(r"\bselected\b"))
    page.keyboard.press("Enter")
    expect(page.locator("#step-1 .show-less")).to_be_visible()
    page.locator("#steps").evaluate("(steps) => steps.scrollBy(0, 300)")
    expect(page.locator("#step-1 .show-less")).to_be_in_viewport()
    screenshot(page, "trace-expanded")
    page.keyboard.press("Escape")
    expect(page.locator("#step-1 .read-more")).to_be_visible()
    page.keyboard.press("ArrowDown")
    expect(page.locator("#step-2")).to_have_class(re.compile(r"\bselected\b"))
    expect(page.locator("#step-1")).not_to_have_class(re.compile(r"\bselected\b"))


def test_an_import_error_shows_the_api_message(page: Page, alice_key: str, alice: httpx.Client) -> None:
    bad = '{"messages": [{"role": "wizard", "content": "hi"}]}'
    worded = alice.post("/traces/import", json={"format": "openai_chat", "data": bad}).json()["detail"]
    sign_in(page, alice_key)

    page.click("#open-import")
    page.fill("#import-paste", bad)
    page.select_option("#import-format", "openai_chat")
    page.click("#import-submit")

    expect(page.locator("#import-error")).to_have_text(f"422: {worded}")
    screenshot(page, "import-dialog-error")


def test_connect_an_agent_shows_the_otlp_settings_and_a_new_key(
    page: Page, stack: RunningStack, alice_key: str
) -> None:
    sign_in(page, alice_key)
    page.click("#connect-agent")
    settings = page.locator("#connect-settings")
    expect(settings).to_contain_text(f"OTEL_EXPORTER_OTLP_ENDPOINT={stack.gateway_url}/api/v1/rm/otel")
    expect(settings).to_contain_text("OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf")

    page.get_by_role("button", name="Create a key for this agent").click()

    page.fill("#connect-source", "support-bot")

    shown = page.locator("#connect-settings")
    headers = r'HEADERS="Authorization=Bearer srm_\S+,X-Stash-Trace-Source=support-bot"'
    expect(shown).to_contain_text(re.compile(headers))
    screenshot(page, "connect-dialog")
    found = re.search(r"Bearer (srm_[^,\"]+)", shown.text_content() or "")
    assert found is not None
    new_key = found[1]
    with stack.client(new_key) as agent:
        me = agent.get("/me").json()
    assert (me["user_name"], me["read_only"]) == (f"alice{stack.user_suffix}", False)


def test_a_read_only_key_sees_everything_and_every_write_is_disabled(
    page: Page, alice_read_only_key: str, imported: dict[str, Any]
) -> None:
    sign_in(page, alice_read_only_key)
    expect(page.locator("#read-only-notice")).to_be_visible()
    expect(page.locator("#open-import")).to_be_disabled()
    expect(page.locator("#open-import")).to_have_attribute("title", re.compile("read-only key"))

    page.goto(f"/traces/{imported['id']}")
    expect(page.locator("#trace-title")).to_have_text(imported["title"])
    expect(page.locator("#comment-trace")).to_be_disabled()
    expect(page.locator("#rescore")).to_be_disabled()
    expect(page.locator("#step-1").get_by_role("button", name="Comment")).to_be_disabled()
    for button in page.locator("li.annotation button").all():
        expect(button).to_be_disabled()
    csrf = page.request.get("/ui/session").json()["csrf"]
    refused = page.request.post(
        f"/api/v1/rm/traces/{imported['id']}/annotations", data={"comment": "x"}, headers={"X-Stash-CSRF": csrf}
    )
    assert refused.status == 403 and "read-only" in refused.json()["detail"]


def test_another_users_trace_is_not_found(page: Page, bob_key: str, imported: dict[str, Any]) -> None:
    sign_in(page, bob_key)
    page.goto(f"/traces/{imported['id']}")

    expect(page.locator("#not-found")).to_contain_text("belongs to another account")
    expect(page.locator("#trace-title")).to_have_count(0)


def test_a_switched_off_account_gets_a_clear_page(page: Page, stack: RunningStack) -> None:
    key = stack.create_user("carol")
    assert stash_rm("users", "disable", f"carol{stack.user_suffix}", env=stack.env).returncode == 0
    page.goto("/")
    page.fill("#sign-in-key", key)
    page.click("form.sign-in button[type=submit]")

    expect(page.locator("#account-disabled h1")).to_have_text("Reward models are switched off for this account")


def test_cookie_writes_need_the_csrf_token_and_pages_send_a_strict_policy(page: Page, alice_key: str) -> None:
    sign_in(page, alice_key)
    body = {"source_id": "spotter", "name": "renamed"}

    forged = page.request.put("/api/v1/rm/trace-sources", data=body)
    csrf = page.request.get("/ui/session").json()["csrf"]
    allowed = page.request.put("/api/v1/rm/trace-sources", data=body, headers={"X-Stash-CSRF": csrf})

    assert forged.status == 403 and "X-Stash-CSRF" in forged.json()["detail"]
    assert allowed.status == 200
    shell = page.request.get("/traces")
    policy = shell.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy and "unsafe-inline" not in policy
    assert shell.headers["cache-control"] == "no-store"
    assert page.request.get("/api/v1/rm/traces").headers["cache-control"] == "no-store"
    cookie = next(item for item in page.context.cookies() if item["name"] == "stash_session")
    assert (cookie["httpOnly"], cookie["sameSite"]) == (True, "Strict")


def test_sign_out_ends_the_session(page: Page, alice_key: str) -> None:
    sign_in(page, alice_key)

    sign_out(page)

    assert page.request.get("/api/v1/rm/traces").status == 401
    page.goto("/traces")
    expect(page.locator("#sign-in-key")).to_be_visible()


def test_a_5000_step_trace_draws_only_the_rows_in_view(page: Page, alice_key: str, alice: httpx.Client) -> None:
    response = alice.post("/traces/import", json={"format": "stash", "data": long_trace_line(5000)})
    assert response.status_code == 200, response.text
    _evaluated(alice, response.json()["trace_ids"][0])  # the minimap shows once actions have grades
    sign_in(page, alice_key)
    page.goto(f"/traces/{response.json()['trace_ids'][0]}")
    expect(page.locator("#step-1")).to_be_visible()

    drawn = page.locator("article.step").count()
    box = page.locator("#minimap").bounding_box()
    assert box is not None
    page.mouse.click(box["x"] + box["width"] - 1, box["y"] + box["height"] / 2)

    assert 0 < drawn < 100
    expect(page.locator("#step-5000")).to_be_visible()
    selected = page.locator("article.step.selected")
    expect(selected).to_have_count(1)
    screenshot(page, "trace-5000-steps-end")
    # The minimap's last pixel covers the last few steps.
    assert int(selected.locator(".gutter").text_content() or "0") > 4990
    expect(page.locator("#step-1")).to_have_count(0)
    assert page.locator("article.step").count() < 100


def test_an_otel_trace_shows_its_spans_on_one_time_axis(page: Page, alice_key: str, alice: httpx.Client) -> None:
    data = (REAL_FIXTURES / "otlp" / "genai-interlingua-openllmetry-0.62.3.json").read_text(encoding="utf-8")
    trace_id = alice.post("/traces/import", json={"format": "otel", "data": data}).json()["trace_ids"][0]
    spans = alice.get(f"/traces/{trace_id}").json()["spans"]
    sign_in(page, alice_key)
    page.goto(f"/traces/{trace_id}")

    timeline = page.locator("#span-timeline")
    timeline.locator("summary").click()

    expect(timeline.locator("summary")).to_contain_text(f"{len(spans)} spans")
    expect(timeline.locator(".span-row")).to_have_count(len(spans))
    expect(timeline.locator(".span-label").first).to_have_text(spans[0]["name"])


def test_a_quote_across_highlighted_code_keeps_its_exact_text(page: Page, alice_key: str, alice: httpx.Client) -> None:
    answer = 'Call it with a zone:\n```python\nparse_date("2026-03-02", tz=UTC)  # keep the zone\n```\nDone.'
    trace = {"steps": [{"role": "user", "content": "How do I parse dates?"}, {"role": "assistant", "content": answer}]}
    response = alice.post("/traces/import", json={"format": "stash", "data": orjson.dumps(trace).decode()})
    # Evaluated first: the credit graph appearing with the grades would move the text between aim and drag.
    detail = _evaluated(alice, response.json()["trace_ids"][0])
    step = detail["steps"][1]
    start = answer.index('"2026')
    end = answer.index("  # keep")
    sign_in(page, alice_key)
    page.goto(f"/traces/{detail['id']}")
    expect(page.locator("#step-2 .code-block .tok-string")).to_have_text(['"2026-03-02"'])

    _drag_select(page, step["id"], start, end)
    page.click("#annotate-selection")
    page.fill("#annotation-comment", "Quoted across tokens")
    page.click("#annotation-save")

    expect(page.locator("#step-2 li.annotation")).to_contain_text("Quoted across tokens")
    exported = [orjson.loads(line) for line in alice.get("/export/annotations").text.splitlines()]
    quote = next(item["quote"] for item in exported if item["comment"] == "Quoted across tokens")
    assert quote == _quote_of(answer, start, end)


def test_the_minimap_bars_are_the_steps_expected_credit(page: Page, alice_key: str, imported: dict[str, Any]) -> None:
    steps = imported["steps"]
    shown = next(
        index for index, step in enumerate(steps) if (step["metadata"].get("reward") or {}).get("expected_credit")
    )
    sign_in(page, alice_key)
    page.goto(f"/traces/{imported['id']}")
    box = page.locator("#minimap").bounding_box()
    assert box is not None

    page.mouse.move(box["x"] + (shown + 0.5) * box["width"] / len(steps), box["y"] + box["height"] / 2)

    credit = signed(steps[shown]["metadata"]["reward"]["expected_credit"])
    expect(page.locator("#minimap-hover")).to_have_text(re.compile(rf"· automatic credit {re.escape(credit)}"))


def test_without_a_fast_model_sections_and_completion_say_which_setting_enables_them(
    page: Page, alice_key: str, imported: dict[str, Any]
) -> None:
    sign_in(page, alice_key)
    page.goto(f"/traces/{imported['id']}")

    missing = page.locator("#completion-missing")
    expect(missing).to_contain_text("Completion curve unavailable: no fast model is configured")
    expect(missing).to_contain_text("STASH_ANTHROPIC_API_KEY")
    screenshot(page, "trace-completion-unavailable")
    page.click("#open-sections")
    notice = page.locator("#sections-unscored")
    expect(notice).to_contain_text(
        "Section scores are unavailable: no fast model is configured: set STASH_ANTHROPIC_API_KEY"
    )
    expect(page.locator("#section-list .section-score.unscored").first).to_have_text("Unscored")
    screenshot(page, "sections-unscored")


def test_tool_inputs_are_shown_and_folded_only_when_long(page: Page, alice_key: str, alice: httpx.Client) -> None:
    patch = "\n".join(f"line {number}: keep the time zone" for number in range(40))
    steps = [
        {"role": "user", "content": "Fix the dates and look up the order."},
        {"role": "assistant", "content": "", "tool_name": "lookup_order", "tool_input": {"order_id": "1182"}},
        {"role": "tool", "content": "delivered", "tool_name": "lookup_order"},
        {"role": "assistant", "content": "", "tool_name": "apply_patch", "tool_input": {"patch": patch}},
        {"role": "tool", "content": "applied", "tool_name": "apply_patch"},
    ]
    data = orjson.dumps({"id": "tool-inputs", "steps": steps}).decode()
    trace_id = alice.post("/traces/import", json={"format": "stash", "data": data}).json()["trace_ids"][0]
    sign_in(page, alice_key)
    page.goto(f"/traces/{trace_id}")

    short = page.locator("#step-2 details.disclosure")
    expect(short).to_have_attribute("open", "")
    expect(short.locator(".disclosure-body")).to_contain_text('"order_id": "1182"')
    long = page.locator("#step-4 details.disclosure")
    expect(long).not_to_have_attribute("open", "")
    # Its 40 lines are one JSON string, so three lines of JSON: long by their characters, which the row counts.
    shown = len(orjson.dumps({"patch": patch}, option=orjson.OPT_INDENT_2))
    expect(long.locator("summary")).to_contain_text(f"Input to apply_patch · {shown:,} characters, folded")
    screenshot(page, "trace-tool-inputs")
    long.locator("summary").click()
    expect(long.locator(".disclosure-body")).to_contain_text("line 39: keep the time zone")


def test_the_step_list_fills_a_taller_window(page: Page, alice_key: str, imported: dict[str, Any]) -> None:
    page.set_viewport_size({"width": 1440, "height": 500})
    sign_in(page, alice_key)
    page.goto(f"/traces/{imported['id']}")
    expect(page.locator("#step-1")).to_be_visible()

    page.set_viewport_size({"width": 1440, "height": 2600})

    # The rows drawn reach the bottom of the (now much taller) list: no blank stretch below them.
    page.wait_for_function(
        "() => { const s = document.getElementById('steps'); const rows = [...s.querySelectorAll('.virtual-row')];"
        " const bottom = Math.max(...rows.map((r) => r.getBoundingClientRect().bottom));"
        " return bottom >= s.getBoundingClientRect().bottom; }"
    )
    screenshot(page, "trace-after-resize")


def test_the_headers_rating_and_comment_counts_follow_a_saved_annotation(
    page: Page, alice_key: str, alice: httpx.Client
) -> None:
    data = stash_line("counted")
    trace_id = alice.post("/traces/import", json={"format": "stash", "data": data}).json()["trace_ids"][0]
    sign_in(page, alice_key)
    page.goto(f"/traces/{trace_id}")
    counts = page.locator("#trace-counts")
    expect(counts).to_have_text("+0 / −0 ratings · 0 comments")

    page.locator("#step-3").get_by_role("button", name="Comment").click()
    page.check("#rating-down")
    page.fill("#annotation-comment", "Looked up the wrong order")
    page.click("#annotation-save")

    expect(counts).to_have_text("+0 / −1 ratings · 1 comment")
    screenshot(page, "trace-counts")
    summary = next(trace for trace in alice.get("/traces").json()["traces"] if trace["id"] == trace_id)
    assert (summary["positive_count"], summary["negative_count"], summary["comment_count"]) == (0, 1, 1)


def test_a_claude_code_slash_command_is_titled_by_its_name(page: Page, alice_key: str, alice: httpx.Client) -> None:
    data = (REAL_FIXTURES / "claude-code" / "spotter-v2.1-task-subagent-parent.jsonl").read_text()
    imported = alice.post("/traces/import", json={"format": "claude_code", "data": data}).json()
    sign_in(page, alice_key)

    row = page.locator(f"tr[data-trace-id='{imported['trace_ids'][0]}']")
    expect(row.locator("td.title")).to_have_text("/handgemacht:create-beads")
    row.locator("td.title a").click()
    expect(page.locator("#trace-title")).to_have_text("/handgemacht:create-beads")
    screenshot(page, "trace-claude-code-title")
