"""The main job on the embedded profile, run against a started local stack.

It creates a user and an API key through the gateway's admin routes, shows every service healthy through the gateway,
imports the sample traces shipped with the CLI (several formats, tool calls, user
reactions), waits for the labeler to label and score each one, prints every trace
with its automatic score and outcome, then trains a reward model on the samples'
automatic action credit (the packaged MiniLM, on this machine's CPU or GPU) and prints
its metrics.
"""

from __future__ import annotations

import time
from contextlib import closing
from http import HTTPStatus
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from stash_cli.accounts import AdminClient
from stash_cli.client import ApiError, GatewayClient
from stash_cli.stack import Layout

DEMO_USER = "demo"
SAMPLES_DIR = Path(__file__).parent / "samples"
EVALUATION_WAIT_S = 60.0
TRAINING_WAIT_S = 1800.0
AUTOMATIC_CREDIT = {"input_version": 3, "annotation_source": "automatic"}
METRICS_SHOWN = (
    "train_pairs",
    "eval_pairs",
    "eval_accuracy",
    "excluded_cross_trace_pairs",
    "action_eval_accuracy",
    "final_loss",
    "epochs",
    "device",
    "seconds",
)


def demo_key(admin: AdminClient) -> str:
    """A full-access key of the demo user, creating the user on the first run."""
    try:
        return admin.create_user(DEMO_USER)["key"]["key"]
    except ApiError as error:
        if error.status_code != HTTPStatus.CONFLICT:  # 409: the demo user exists from an earlier run
            raise
    return admin.create_key(DEMO_USER, "demo", read_only=False)["key"]


def run_demo(layout: Layout, admin_key: str, console: Console) -> None:
    """Create the demo account through the admin routes, check the stack, import the samples and show them."""
    with closing(AdminClient(layout.gateway_url, admin_key)) as admin:
        key = demo_key(admin)
    client = GatewayClient(layout.gateway_url, key)
    try:
        _show_health(client, console)
        for path in sorted(SAMPLES_DIR.glob("*.jsonl")):
            source = path.name.split(".")[0]
            result = client.import_traces(path.read_text(encoding="utf-8"), source_id=source)
            console.print(f"Imported {result['imported']} {result['format']} trace(s) from {path.name} as {source}")
        listing = _wait_for_evaluations(client, console)
        _show_traces(listing, console)
        _show_model(_train(client, console, [trace["id"] for trace in listing["traces"]]), console)
    finally:
        client.close()
    console.print(f"API key for this stack (full access): [bold]{key}[/bold]")


def _show_health(client: GatewayClient, console: Console) -> None:
    health = client.health()
    me = client.call("GET", "/me")
    table = Table("service", "health", title="Gateway /healthz")
    for name, state in health["services"].items():
        table.add_row(name, state)
    console.print(table)
    console.print(f"Signed in through the API as [bold]{me['user_name']}[/bold] ({me['user_id']}).")


def _wait_for_evaluations(client: GatewayClient, console: Console) -> dict[str, Any]:
    """The trace list once every trace has been labeled and scored (or the wait ran out)."""
    deadline = time.monotonic() + EVALUATION_WAIT_S
    with console.status("Labeling and scoring every step…"):
        while True:
            listing = client.call("GET", "/traces", params={"limit": 100})
            if all(trace["evaluation"] for trace in listing["traces"]) or time.monotonic() > deadline:
                return listing


def _show_traces(listing: dict[str, Any], console: Console) -> None:
    table = Table("title", "format", "source", "steps", "score", "outcome", title=f"{listing['total']} traces")
    for trace in listing["traces"]:
        evaluation = trace["evaluation"] or {}
        score = evaluation.get("score")
        table.add_row(
            trace["title"],
            trace["source_format"],
            trace["source_name"],
            str(trace["step_count"]),
            "—" if score is None else f"{score:+.2f}",
            evaluation.get("outcome") or "not evaluated",
        )
    console.print(table)


def _train(client: GatewayClient, console: Console, trace_ids: list[str]) -> dict[str, Any]:
    """Train a reward model on the samples and wait until it succeeds or fails."""
    body = {"name": "demo reward model", "trace_ids": trace_ids, "training_config": AUTOMATIC_CREDIT}
    model = client.call("POST", "/reward-models", json=body)
    deadline = time.monotonic() + TRAINING_WAIT_S
    with console.status("Training a reward model on the samples…") as status:
        while model["status"] in ("queued", "running") and time.monotonic() < deadline:
            time.sleep(1.0)
            model = client.call("GET", f"/reward-models/{model['id']}")
            status.update(f"Training a reward model on the samples… ({model['progress'].get('stage', 'queued')})")
    return model


def _show_model(model: dict[str, Any], console: Console) -> None:
    if model["status"] != "succeeded":
        console.print(f"[red]Reward model {model['status']}:[/red] {model['error'] or 'still training'}")
        return
    table = Table("metric", "value", title=f"Reward model {model['name']} ({model['num_pairs']} pairs)")
    for name in METRICS_SHOWN:
        value = model["metrics"].get(name)
        table.add_row(name, "—" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value))
    console.print(table)
