"""The web UI's browser tests: which chromium, where screenshots go, and signing in through the form."""

from __future__ import annotations

import os
from pathlib import Path

from playwright.sync_api import Page, expect

from support.fixtures import REPO_ROOT

CHROMIUM = os.environ.get("STASH_CHROMIUM", "/usr/bin/chromium")
SCREENSHOTS = Path(os.environ.get("STASH_UI_SCREENSHOTS", REPO_ROOT / "tests" / "ui" / "screenshots"))
VIEWPORT = {"width": 1440, "height": 900}


def screenshot(page: Page, name: str) -> Path:
    """Save what the page shows now as `<name>.png` in the screenshots folder."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path


def sign_in(page: Page, key: str) -> None:
    """Sign in through the form and wait for the traces screen."""
    page.goto("/")
    page.fill("#sign-in-key", key)
    page.click("form.sign-in button[type=submit]")
    page.wait_for_selector("h1:text('Traces')")


def sign_out(page: Page) -> None:
    """Sign out through the sidebar and wait for the sign-in form: the session ends only when the page's
    DELETE has been answered, and a navigation started before that would abort it and stay signed in."""
    page.click("#sign-out")
    expect(page.locator("#sign-in-key")).to_be_visible()


def signed(value: float | None) -> str:
    """A score as the UI writes it: +0.35, −1.00 (a real minus sign), 0.00 (also for −0.001), — for none."""
    if value is None:
        return "—"
    text = f"{abs(value):.2f}"
    if float(text) == 0:
        return text  # never "−0.00"
    return f"+{text}" if value > 0 else f"−{text}"
