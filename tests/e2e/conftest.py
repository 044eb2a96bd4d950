"""The accounts every end-to-end module signs in with, made once per module on that module's stack, and the
session's trained model.

Each module defines its own `stack` fixture (the profile and settings it runs under); these
fixtures create users on whichever stack that is, through `stash-rm users create`.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from support.models import TrainedModel, finished_model, rated_traces
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


@pytest.fixture(scope="session")
def trained_model(cluster_stack: RunningStack) -> TrainedModel:
    """Four traces, each with its lookup call rated + and its answer rated −, and one real training run of two
    epochs on them; the modules sharing it sign in as its owner and check what they need of it."""
    stack = cluster_stack.for_module("trained")
    key = stack.create_user("owner")
    with stack.client(key) as owner:
        trace_ids = rated_traces(owner, 4)
        created = owner.post("/reward-models", json={"name": "refund credit", "trace_ids": trace_ids, "epochs": 2})
        assert created.status_code == 200, created.text
        return TrainedModel(key, trace_ids, created.json(), finished_model(owner, created.json()["id"]))
