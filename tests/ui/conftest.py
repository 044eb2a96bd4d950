"""A real stack (`stash-rm up`, embedded profile) and Debian's chromium driven by Playwright.

Playwright's own browser downloads are unreachable, so the browser is the system's chromium
(`STASH_CHROMIUM`, default `/usr/bin/chromium`; `.ci/run` installs it when missing). Screenshots go to
`STASH_UI_SCREENSHOTS` (default `tests/ui/screenshots/`, ignored by git), for CI to keep as artifacts.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from support.browser import CHROMIUM, VIEWPORT
from support.processes import stash_rm
from support.stack import RunningStack


@pytest.fixture(scope="module")
def stack(embedded_stack: RunningStack, request: pytest.FixtureRequest) -> RunningStack:
    """The session's stack, whose users this module names its own (`alice-<module>`)."""
    return embedded_stack.for_module(request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_"))


@pytest.fixture(scope="module")
def alice_key(stack: RunningStack) -> str:
    """The full-access key of `alice`, who imports and annotates."""
    return stack.create_user("alice")


@pytest.fixture(scope="module")
def alice_read_only_key(stack: RunningStack, alice_key: str) -> str:
    """A second key of alice's that may only read."""
    created = stash_rm("keys", "create", f"alice{stack.user_suffix}", "--read-only", env=stack.env)
    assert created.returncode == 0, created.stderr
    return created.stdout.split("shown once): ")[1].split()[0]


@pytest.fixture(scope="module")
def bob_key(stack: RunningStack) -> str:
    """Another user, who must not see alice's traces."""
    return stack.create_user("bob")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no chromium at {CHROMIUM}: `apt-get install -y chromium` (.ci/run does), or set STASH_CHROMIUM")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser, stack: RunningStack) -> Iterator[Page]:
    """A fresh browser context (no cookies, no stored theme) on the stack's gateway."""
    context = browser.new_context(base_url=stack.gateway_url, viewport=VIEWPORT)
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    # Refused scripts or styles (the page's own policy) and other console errors; an API answer of 4xx is
    # logged as a failed resource load, which tests provoke on purpose.
    opened.on(
        "console",
        lambda message: (
            message.type == "error"
            and not message.text.startswith("Failed to load resource")
            and errors.append(message.text)
        ),
    )
    yield opened
    context.close()
    assert not errors, f"the page raised: {errors}"
