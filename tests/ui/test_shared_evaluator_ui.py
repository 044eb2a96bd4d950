"""The shared evaluator's credit in the trace view, in a real browser: none before a release, then by default.

A personal model trained on the packaged MiniLM stands for a candidate, published as release 1 over real gRPC
with its training job's key (read from the trainer's table), as the trainer publishes a release.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from stash.rm.v1 import scorer_pb2, scorer_pb2_grpc
from stash_common.channels import open_channel
from stash_common.messages import timestamp_of
from support.browser import screenshot, sign_in, signed
from support.models import rated_traces
from support.stack import RunningStack, running_stack

WAIT_S = 300
FAST_TRAINING = {"STASH_TRAINER_MAX_LENGTH": "128", "STASH_TRAINER_DEVICE": "cpu", "STASH_SCORER_MAX_LENGTH": "128"}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    with running_stack(tmp_path_factory.mktemp("ui-shared-evaluator"), **FAST_TRAINING) as running:
        yield running


@pytest.fixture(scope="module")
def alice(stack: RunningStack, alice_key: str) -> Iterator[httpx.Client]:
    with stack.client(alice_key) as client:
        yield client


@pytest.fixture(scope="module")
def traces(alice: httpx.Client) -> list[str]:
    """Three support traces whose lookup call is rated + and whose answer −."""
    return rated_traces(alice, 3, prefix="shared-ui")


def _waited(what: str, probe: Any) -> Any:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if (found := probe()) is not None:
            return found
        time.sleep(0.5)
    raise TimeoutError(f"{what} within {WAIT_S}s")


def _finished(client: httpx.Client, model_id: str) -> dict[str, Any] | None:
    model = client.get(f"/reward-models/{model_id}").json()
    return model if model["status"] in ("succeeded", "failed") else None


def _scored_by_release_1(client: httpx.Client, trace_id: str) -> dict[str, Any] | None:
    shared = client.get(f"/traces/{trace_id}").json()["shared_evaluator"]
    return shared if shared["release"] == 1 else None


def _publish_release(stack: RunningStack, alice: httpx.Client, traces: list[str]) -> None:
    """Train a model on the traces and publish its training job as release 1."""
    model_id = alice.post("/reward-models", json={"name": "candidate", "trace_ids": traces}).json()["id"]
    model = _waited("the model did not finish", lambda: _finished(alice, model_id))
    assert model["status"] == "succeeded", model["error"]
    with sqlite3.connect(f"file:{stack.data_dir / 'trainer.db'}?mode=ro", uri=True) as db:
        (job_id,) = db.execute("SELECT job_id FROM reward_models WHERE id = ?", (model_id,)).fetchone()
    channel = open_channel(stack.env["STASH_SCORER_ADDRESS"])
    request = scorer_pb2.PublishEvaluatorReleaseRequest(
        number=1, job_key=f"jobs/trainer/{job_id}", released_at=timestamp_of(datetime.now(UTC))
    )
    scorer_pb2_grpc.ScorerServiceStub(channel).PublishEvaluatorRelease(request, timeout=30)
    channel.close()


def test_the_trace_view_shows_the_shared_evaluators_credit_by_default_once_released(
    page: Page, stack: RunningStack, alice_key: str, alice: httpx.Client, traces: list[str]
) -> None:
    sign_in(page, alice_key)
    page.goto(f"/traces/{traces[0]}")
    expect(page.locator("#shared-none")).to_have_text("No shared evaluator released yet.")
    expect(page.locator(".credit-badge")).to_have_count(0)
    screenshot(page, "trace-no-shared-evaluator")

    _publish_release(stack, alice, traces)
    shared = _waited("release 1 did not score the trace", lambda: _scored_by_release_1(alice, traces[0]))
    page.goto(f"/traces/{traces[0]}")

    expect(page.locator("#credit-model")).to_have_value("shared-evaluator")
    expect(page.locator("#shared-status")).to_have_text(f"Release 1: {len(shared['action_scores'])} actions scored")
    for score in shared["action_scores"]:
        badge = page.locator(f"article[data-step-id='{score['step_id']}'] .credit-badge")
        expect(badge).to_have_text(f"learned credit {signed(score['credit'])}")
    expect(page.locator("#minimap-legend")).to_contain_text("learned credit of shared evaluator release 1")
    expect(page.locator("#shared-none")).to_have_count(0)
    screenshot(page, "trace-shared-evaluator-credit")
    page.select_option("#credit-model", "")
    expect(page.locator(".credit-badge")).to_have_count(0)
