"""Reviewers in the browser: the owner shares traces on the Reviewers page, the reviewer finds them under
Shared with me (filtered by the owner's sources, under the owner's names), annotates one, and sees the owner's
controls disabled with the reason as their tooltip."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Page, expect

from support.browser import screenshot, sign_in
from support.ingest import stash_line
from support.stack import RunningStack


@pytest.fixture(scope="module")
def owner_name(stack: RunningStack) -> str:
    """The owner's user name on the shared stack (`create_user` adds the module's suffix)."""
    return f"olivia{stack.user_suffix}"


@pytest.fixture(scope="module")
def reviewer_name(stack: RunningStack) -> str:
    return f"rita{stack.user_suffix}"


@pytest.fixture(scope="module")
def owner_key(stack: RunningStack) -> str:
    return stack.create_user("olivia")


@pytest.fixture(scope="module")
def reviewer_key(stack: RunningStack) -> str:
    return stack.create_user("rita")


@pytest.fixture(scope="module")
def owner(stack: RunningStack, owner_key: str) -> Iterator[httpx.Client]:
    with stack.client(owner_key) as client:
        yield client


@pytest.fixture(scope="module")
def shared_trace(owner: httpx.Client, reviewer_key: str) -> str:
    """A trace in the owner's `shop` source with the owner's own comment, and one in `lab`."""
    imported = owner.post(
        "/traces/import", json={"format": "stash", "data": stash_line("ui-shop"), "source_id": "shop"}
    )
    assert imported.status_code == 200, imported.text
    lab = owner.post("/traces/import", json={"format": "stash", "data": stash_line("ui-lab"), "source_id": "lab"})
    assert lab.status_code == 200, lab.text
    trace_id = str(imported.json()["trace_ids"][0])
    note = owner.post(f"/traces/{trace_id}/annotations", json={"comment": "the owner's own note"})
    assert note.status_code == 201, note.text
    return trace_id


def test_the_owner_shares_one_source_on_the_reviewers_page(
    page: Page, owner_key: str, reviewer_name: str, shared_trace: str
) -> None:
    sign_in(page, owner_key)
    page.goto("/reviewers")
    expect(page.locator("#no-reviewers")).to_be_visible()

    page.fill("#grant-reviewer", reviewer_name)
    page.uncheck("#grant-all")
    page.locator(".grant-source[value='shop']").check()
    page.click("#grant-submit")

    row = page.locator(f"#grant-table tr[data-reviewer='{reviewer_name}']")
    expect(row).to_contain_text("shop")
    expect(row).not_to_contain_text("lab")
    screenshot(page, "reviewers-grant")
    page.fill("#grant-reviewer", "nobody-here")
    page.click("#grant-submit")
    expect(page.locator("#grant-error")).to_contain_text("nobody-here")


def test_the_reviewer_finds_annotates_and_sees_why_owner_controls_are_disabled(
    page: Page, reviewer_key: str, owner_name: str, shared_trace: str
) -> None:
    sign_in(page, reviewer_key)
    page.goto("/shared")
    rows = page.locator("#shared-table tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first.locator(".owner")).to_have_text(owner_name)
    screenshot(page, "reviewers-shared-list")

    rows.first.locator("a").click()
    expect(page.locator("#reviewing-notice")).to_contain_text(f"Shared with you for review by {owner_name}")
    expect(page.locator("#back-to-list")).to_have_text("← Shared with me")
    rescore = page.locator("#rescore")
    expect(rescore).to_be_disabled()
    expect(rescore).to_have_attribute("title", "Shared with you for review: only the trace's owner can relabel it.")
    expect(page.locator("#credit-none")).to_contain_text("owner's models")
    owners_note = page.locator(".trace-notes .annotation", has_text="the owner's own note")
    expect(owners_note.get_by_role("button", name="Edit")).to_be_disabled()
    expect(owners_note.get_by_role("button", name="Edit")).to_have_attribute(
        "title", f"Written by {owner_name}: only its author can edit it."
    )
    expect(owners_note.get_by_role("button", name="Delete")).to_be_disabled()
    expect(owners_note.get_by_role("button", name="Delete")).to_have_attribute(
        "title", f"Written by {owner_name}: only its author can delete it."
    )
    expect(owners_note.get_by_role("button", name="Flag label error")).to_be_enabled()

    page.click("#comment-trace")
    page.fill("#annotation-comment", "the reviewer's note")
    page.click("#annotation-save")
    mine = page.locator(".trace-notes .annotation", has_text="the reviewer's note")
    expect(mine).to_contain_text("rita")
    expect(mine.get_by_role("button", name="Edit")).to_be_enabled()
    expect(mine.get_by_role("button", name="Delete")).to_be_enabled()
    screenshot(page, "reviewers-trace")


def test_the_owner_sees_the_reviewer_s_note_with_its_author(
    page: Page, owner_key: str, owner_name: str, reviewer_name: str, owner: httpx.Client, shared_trace: str
) -> None:
    authors = {a["author_name"] for a in owner.get(f"/traces/{shared_trace}").json()["annotations"]}
    assert authors == {owner_name, reviewer_name}
    sign_in(page, owner_key)
    page.goto(f"/traces/{shared_trace}")

    theirs = page.locator(".trace-notes .annotation", has_text="the reviewer's note")
    expect(theirs).to_contain_text("rita")
    expect(theirs.get_by_role("button", name="Edit")).to_be_disabled()
    expect(theirs.get_by_role("button", name="Delete")).to_be_enabled()
    expect(page.locator("#reviewing-notice")).to_have_count(0)
    expect(page.locator("#back-to-list")).to_have_text("← Traces")


def test_the_reviewer_filters_the_shared_list_by_the_owner_s_named_sources(
    page: Page, owner: httpx.Client, reviewer_key: str, owner_name: str, reviewer_name: str, shared_trace: str
) -> None:
    assert owner.put(f"/reviewers/{reviewer_name}", json={"source_ids": None}).status_code == 200
    assert owner.put("/trace-sources", json={"source_id": "shop", "name": "Olivia's shop"}).status_code == 200
    sign_in(page, reviewer_key)
    page.goto("/shared")
    rows = page.locator("#shared-table tbody tr")
    expect(rows).to_have_count(2)

    page.select_option("#shared-source", label=f"Olivia's shop ({owner_name}, 1)")

    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-trace-id", shared_trace)
    expect(rows.first).to_contain_text("Olivia's shop")
    expect(page.locator("#shared-owner option:checked")).to_contain_text(owner_name)
    screenshot(page, "reviewers-shared-source-filter")
    page.select_option("#shared-source", label="All sources")
    expect(rows).to_have_count(2)


def test_the_owner_changes_and_removes_a_grant_on_the_reviewers_page(
    page: Page,
    stack: RunningStack,
    owner: httpx.Client,
    owner_key: str,
    reviewer_key: str,
    reviewer_name: str,
    shared_trace: str,
) -> None:
    sign_in(page, owner_key)
    page.goto("/reviewers")
    row = page.locator(f"#grant-table tr[data-reviewer='{reviewer_name}']")
    expect(row).to_contain_text("every source")

    row.get_by_role("button", name="Change").click()
    expect(page.locator("#grant-reviewer")).to_have_value(reviewer_name)
    expect(page.locator("#grant-all")).to_be_checked()
    page.uncheck("#grant-all")
    page.locator(".grant-source[value='lab']").check()
    page.click("#grant-submit")

    expect(row.locator("td").nth(1)).to_have_text("lab")
    screenshot(page, "reviewers-changed")
    # A granted source that holds no trace yet is kept when the grant is changed again.
    assert owner.put(f"/reviewers/{reviewer_name}", json={"source_ids": ["lab", "later"]}).status_code == 200
    page.reload()
    row.get_by_role("button", name="Change").click()
    expect(page.locator(".grant-source[value='later']")).to_be_checked()
    page.locator(".grant-source[value='shop']").check()
    page.click("#grant-submit")
    expect(row.locator("td").nth(1)).to_have_text("lab, later, shop")
    with stack.client(reviewer_key) as reviewer:
        assert sorted(t["source_id"] for t in reviewer.get("/shared/traces").json()["traces"]) == ["lab", "shop"]
        row.get_by_role("button", name="Remove").click()
        expect(page.locator("#no-reviewers")).to_be_visible()
        assert reviewer.get("/shared/traces").json()["total"] == 0
        assert reviewer.get(f"/traces/{shared_trace}").status_code == 404
