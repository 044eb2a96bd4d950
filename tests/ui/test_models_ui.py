"""The reward-model screens in a real browser: the training picker, a model training to the end, a failed one."""

from __future__ import annotations

import io
import re
import tarfile
import time
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from playwright.sync_api import Page, expect

from support.browser import screenshot, sign_in, signed
from support.ingest import stash_line
from support.stack import RunningStack, running_stack

TRAINING_WAIT_S = 240
# Fast CPU training on the packaged MiniLM, as the REST tests train.
FAST_TRAINING = {"STASH_TRAINER_MAX_LENGTH": "128", "STASH_TRAINER_DEVICE": "cpu"}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    with running_stack(tmp_path_factory.mktemp("ui-models"), **FAST_TRAINING) as running:
        yield running


@pytest.fixture(scope="module")
def alice(stack: RunningStack, alice_key: str) -> Iterator[httpx.Client]:
    with stack.client(alice_key) as client:
        yield client


def _rated(client: httpx.Client, number: int, source_id: str) -> str:
    """A support trace whose lookup call is rated + and whose answer −: an explicit pair."""
    trace = orjson.loads(stash_line(f"{source_id}-{number}"))
    trace["steps"][1]["content"] = f"I want a refund for order {1100 + number}"
    imported = client.post(
        "/traces/import", json={"format": "stash", "data": orjson.dumps(trace).decode(), "source_id": source_id}
    )
    trace_id = imported.json()["trace_ids"][0]
    steps = client.get(f"/traces/{trace_id}").json()["steps"]
    for step, rating in ((steps[2], 1), (steps[4], -1)):
        response = client.post(f"/traces/{trace_id}/annotations", json={"step_id": step["id"], "rating": rating})
        assert response.status_code == 201, response.text
    return trace_id


@pytest.fixture(scope="module")
def refund_traces(alice: httpx.Client) -> list[str]:
    """Two rated traces of source `refunds`, and one of `billing` (created first, so listed last)."""
    _rated(alice, 0, "billing")
    return [_rated(alice, number, "refunds") for number in (1, 2)]


def _finished(client: httpx.Client, model_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + TRAINING_WAIT_S
    while time.monotonic() < deadline:
        model = client.get(f"/reward-models/{model_id}").json()
        if model["status"] in ("succeeded", "failed"):
            return model
        time.sleep(0.5)
    raise TimeoutError(f"reward model {model_id} did not finish within {TRAINING_WAIT_S}s")


def _row_box(page: Page, trace_id: str) -> Any:
    return page.locator(f"#picker-table tr[data-trace-id='{trace_id}'] input[type=checkbox]")


def test_the_picker_keeps_hidden_selections_and_trains_on_the_shown_source(
    page: Page, alice_key: str, alice: httpx.Client, refund_traces: list[str]
) -> None:
    billing = next(trace["id"] for trace in alice.get("/traces").json()["traces"] if trace["source_id"] == "billing")
    sign_in(page, alice_key)
    page.click("nav a:text('Reward models')")
    page.click("#open-train")

    expect(page.locator("#train-submit")).to_be_disabled()
    expect(page.locator("#train-reason")).to_have_text("Name the model.")
    page.fill("#train-name", "refunds")
    _row_box(page, billing).check()
    expect(page.locator("#train-reason")).to_have_text("Select at least 2 traces: evaluation holds out whole traces.")
    page.check("#picker-all")
    expect(page.locator("#picker-selection")).to_have_text("3 selected")

    page.select_option("#picker-source", "refunds")
    expect(page.locator("#picker-table tbody tr")).to_have_count(2)
    expect(page.locator("#picker-selection")).to_have_text("3 selected · 1 hidden by the filters")
    # The header checkbox clears the shown rows only; the hidden billing trace stays selected.
    page.uncheck("#picker-all")
    expect(page.locator("#picker-selection")).to_have_text("1 selected · 1 hidden by the filters")
    expect(page.locator("#train-submit")).to_be_disabled()
    _row_box(page, refund_traces[0]).check()
    expect(page.locator("#picker-all")).to_have_js_property("indeterminate", True)
    page.click("#picker-only-shown")
    expect(page.locator("#picker-selection")).to_have_text("2 selected")
    expect(page.locator("#train-submit")).to_be_enabled()
    screenshot(page, "train-picker")
    page.click("#train-submit")

    page.wait_for_url(re.compile(r"/models/(?!new$)[^/]+$"))
    model = alice.get(f"/reward-models/{page.url.rsplit('/', 1)[1]}").json()
    assert sorted(model["trace_ids"]) == sorted(refund_traces)
    assert model["training_config"] == {"input_version": 3, "annotation_source": "automatic"}
    expect(page.locator("#model-name")).to_have_text("refunds")


@pytest.fixture(scope="module")
def training(alice: httpx.Client, refund_traces: list[str]) -> str:
    """The id of a model just queued on the rated refund traces (trained with action comparisons)."""
    created = alice.post("/reward-models", json={"name": "refunds-2", "trace_ids": refund_traces})
    assert created.status_code == 200, created.text
    return created.json()["id"]


def test_a_trained_model_shows_metrics_and_its_checkpoint_downloads(
    page: Page, alice_key: str, alice: httpx.Client, training: str
) -> None:
    model_id = training
    sign_in(page, alice_key)
    page.goto(f"/models/{model_id}")
    # The page follows the job by itself: queued, then running with its step count, then done.
    expect(page.locator("#model-progress")).to_have_text(
        re.compile(r"waiting for a worker|preparing the training pairs .*|step \d+ of \d+( · loss \d\.\d{3})?|done")
    )
    # Just queued: a delete would have to cancel training, so it waits until the model settled.
    expect(page.locator("#delete-model")).to_be_disabled()
    expect(page.locator("#delete-model")).to_have_attribute(
        "title", "A model can be deleted once it succeeded or failed"
    )
    trained = _finished(alice, model_id)
    assert trained["status"] == "succeeded", trained["error"]

    expect(page.locator(".status")).to_have_text("succeeded", timeout=10_000)
    expect(page.locator("#model-progress")).to_have_text("done")
    expect(page.locator("#delete-model")).to_be_enabled()
    metrics = trained["metrics"]
    expect(page.locator("#model-metrics")).to_contain_text(f"{metrics['train_pairs']} pair")
    expect(page.locator("#model-metrics")).to_contain_text(f"{metrics['epochs']} epoch")
    quality = trained["quality"]  # a handful of rated traces: too few held-out pairs for a percentage
    expect(page.locator("#model-metrics")).to_contain_text(quality["eval"]["summary"])
    assert "%" not in quality["eval"]["summary"], quality["eval"]
    expect(page.locator("#model-metrics")).to_contain_text("(chance is ln 2 = 0.693; Bradley–Terry, lower is better)")
    warning = page.locator("#model-loss-warning")
    if quality["loss"]["moved"]:
        expect(warning).to_have_count(0)
    else:
        expect(warning).to_contain_text("training did not move the loss off chance")
    page.click("#view-report")
    expect(page.locator("#learning-report")).to_be_visible()
    screenshot(page, "model")
    with page.expect_download() as download:
        page.click("#download-checkpoint")
    with tarfile.open(fileobj=io.BytesIO(download.value.path().read_bytes()), mode="r:gz") as archive:
        assert archive.getnames()

    page.click("a.back")
    row = page.locator(f"#model-table tr[data-model-id='{model_id}']")
    expect(row).to_contain_text("succeeded")
    screenshot(page, "models")


def test_learned_action_credit_is_scored_and_shown_in_the_trace(
    page: Page, alice_key: str, alice: httpx.Client, training: str
) -> None:
    model = _finished(alice, training)
    assert model["metrics"]["action_scoring_version"] == 1, model["error"]
    trace_id = _rated(alice, 3, "refunds")  # imported after training: nothing scored it yet
    sign_in(page, alice_key)
    page.goto(f"/traces/{trace_id}")

    page.select_option("#credit-model", training)
    expect(page.locator(".credit-badge")).to_have_count(0)
    page.click("#score-actions")
    expect(page.locator("#scoring-status")).to_have_text(
        re.compile(r"\d+ actions scored"), timeout=TRAINING_WAIT_S * 1000
    )

    scores = [
        item for item in alice.get(f"/traces/{trace_id}").json()["action_scores"] if item["reward_model_id"] == training
    ]
    assert scores
    for score in scores:
        badge = page.locator(f"article[data-step-id='{score['step_id']}'] .credit-badge")
        expect(badge).to_have_text(f"learned credit {signed(score['credit'])}")
    highlighted = page.locator("article.credit-positive, article.credit-negative")
    expect(highlighted).to_have_count(sum(1 for score in scores if score["credit"] != 0))
    expect(page.locator("#minimap-legend")).to_contain_text("Cells: learned credit of refunds-2")
    screenshot(page, "trace-learned-credit")
    page.select_option("#credit-model", "")
    expect(page.locator(".credit-badge")).to_have_count(0)


def test_the_trace_view_links_the_models_trained_on_it(
    page: Page, alice_key: str, alice: httpx.Client, refund_traces: list[str], training: str
) -> None:
    billing = next(trace["id"] for trace in alice.get("/traces").json()["traces"] if trace["source_id"] == "billing")
    sign_in(page, alice_key)
    page.goto(f"/traces/{billing}")  # never selected for training
    expect(page.locator("#trace-title")).to_be_visible()
    expect(page.locator("#trained-into")).to_have_count(0)

    page.goto(f"/traces/{refund_traces[0]}")
    expect(page.locator("#trained-into")).to_contain_text(re.compile(r"^Trained into: refunds-2(, refunds)?$"))
    screenshot(page, "trace-trained-into")
    page.click(f"#trained-into a[href='/models/{training}']")
    page.wait_for_url(f"**/models/{training}")
    expect(page.locator("#model-name")).to_have_text("refunds-2")


def _failed_without_pairs(client: httpx.Client, name: str) -> tuple[dict[str, Any], list[str]]:
    """A model of two unrated traces, failed (one answer per trace and no ratings: no pair to learn from, so
    training fails before loading a model), with the ids of its traces."""
    unrated = [
        client.post(
            "/traces/import",
            json={
                "format": "stash",
                "data": orjson.dumps(
                    {"steps": [{"role": "user", "content": f"{name} {number}"}, {"role": "assistant", "content": "hi"}]}
                ).decode(),
            },
        ).json()["trace_ids"][0]
        for number in range(2)
    ]
    model_id = client.post("/reward-models", json={"name": name, "trace_ids": unrated}).json()["id"]
    failed = _finished(client, model_id)
    assert failed["status"] == "failed", failed
    return failed, unrated


def test_a_failed_model_shows_its_error_can_be_retried_and_deleted(
    page: Page, alice_key: str, alice: httpx.Client
) -> None:
    failed, _ = _failed_without_pairs(alice, "nothing-to-learn")
    model_id = failed["id"]
    sign_in(page, alice_key)
    page.goto(f"/models/{model_id}")

    expect(page.locator("#model-error-text")).to_have_text(failed["error"])
    assert failed["retryable"]  # ratings added to these traces would let the same model train
    shown = page.locator("#model-error").element_handle()
    with page.expect_response(re.compile(r"/reward-models/[^/]+/retry$")) as retried:
        page.click("#retry-model")
    assert retried.value.status == 202
    shown.wait_for_element_state("hidden")  # the page drew the retried model (queued, running or failed again)
    expect(page.locator("#model-error-text")).to_have_text(failed["error"], timeout=TRAINING_WAIT_S * 1000)
    screenshot(page, "model-failed")

    page.on("dialog", lambda dialog: dialog.accept())
    page.click("#delete-model")
    page.wait_for_url(re.compile(r"/models$"))
    expect(page.locator("h1")).to_have_text("Reward models")
    expect(page.locator(f"#model-table tr[data-model-id='{model_id}']")).to_have_count(0)
    screenshot(page, "models-after-delete")
    assert alice.get(f"/reward-models/{model_id}").status_code == 404


def test_a_model_whose_retry_would_fail_the_same_way_offers_no_retry(
    page: Page, alice_key: str, alice: httpx.Client
) -> None:
    failed, traces = _failed_without_pairs(alice, "lost-a-trace")
    assert alice.delete(f"/traces/{traces[0]}").status_code == 204
    assert alice.post(f"/reward-models/{failed['id']}/retry").status_code == 202
    # Retried without one of its traces, the model fails for good.
    lost = _finished(alice, failed["id"])
    assert (lost["status"], lost["retryable"]) == ("failed", False), lost
    assert lost["error"] == f"could not read the selected traces: NOT_FOUND: trace {traces[0]} not found"
    sign_in(page, alice_key)

    page.goto(f"/models/{failed['id']}")

    expect(page.locator("#model-error-text")).to_have_text(lost["error"])
    expect(page.locator("#model-no-retry")).to_have_text(
        "A retry would fail the same way. Train a new model with other traces, or delete this one."
    )
    expect(page.locator("#retry-model")).to_have_count(0)
    screenshot(page, "model-failed-no-retry")
    assert alice.post(f"/reward-models/{failed['id']}/retry").status_code == 409


def test_a_read_only_key_cannot_train(page: Page, alice_read_only_key: str) -> None:
    sign_in(page, alice_read_only_key)
    page.goto("/models")

    expect(page.locator("#open-train")).to_be_disabled()
    expect(page.locator("#open-train")).to_have_attribute("title", re.compile("read-only key"))
