"""The accounts every end-to-end module signs in with, made once per module on that module's stack.

Each module defines its own `stack` fixture (the profile and settings it runs under); these
fixtures create users on whichever stack that is, through `stash-rm users create`.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from support.stack import RunningStack


@pytest.fixture(scope="module")
def alice(stack: RunningStack) -> Iterator[httpx.Client]:
    """A REST client signed in as a new user `alice`."""
    with stack.client(stack.create_user("alice")) as client:
        yield client


@pytest.fixture(scope="module")
def bob(stack: RunningStack) -> Iterator[httpx.Client]:
    """A REST client signed in as a second user `bob`, for owner isolation."""
    with stack.client(stack.create_user("bob")) as client:
        yield client


@pytest.fixture(scope="module")
def key(stack: RunningStack) -> str:
    """The full-access key of the user an agent sends its traces as."""
    return stack.create_user("agent-owner")


@pytest.fixture(scope="module")
def api(stack: RunningStack, key: str) -> Iterator[httpx.Client]:
    """A REST client signed in with `key`."""
    with stack.client(key) as client:
        yield client
