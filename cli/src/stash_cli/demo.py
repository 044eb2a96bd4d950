"""The main job on the embedded profile, run against a started local stack.

It creates a user and an API key through the gateway's admin routes, shows every service healthy through the gateway,
imports the sample traces shipped with the CLI (several formats, tool calls, user
reactions), waits for the labeler to label and score each one, prints every trace
with its automatic score and outcome, then trains a reward model on the samples'
automatic action credit (the packaged MiniLM, on this machine's CPU or GPU), prints
its metrics, waits until the scores the training job computed for every action are
published, and prints the actions the model credits most and least. Last, when a task and a
reflection model are configured (`ANTHROPIC_API_KEY` for the defaults, or `STASH_TASK_MODEL` and
friends), GEPA writes a SKILL.md against the model; otherwise the demo prints the setting that enables it.

The scores are read back through GET /traces/{id}, the way any client sees them, rather
than taken from the trainer: what the demo prints is what the platform stored.
"""

from __future__ import annotations

import json
import time
from contextlib import closing
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from stash_cli.accounts import AdminClient
from stash_cli.client import ApiError, GatewayClient
from stash_cli.settings import CliSettings
from stash_cli.skills import follow_run, save_skill, show_result, start_run
from stash_cli.stack import Layout

DEMO_USER = "demo"
SAMPLES_DIR = Path(__file__).parent / "samples"
EVALUATION_WAIT_S = 60.0
TRAINING_WAIT_S = 1800.0
SCORING_WAIT_S = 300.0
CREDIT_SHOWN = 5
ACTION_TEXT_SHOWN = 60
TITLE_SHOWN = 40
CREDIT_EXPLAINED = (
    "credit −1…+1: how much this model prefers the action relative to its training reference;"
    " 0 is the reference mean; compare within one model"
)
GEPA_DISABLED = (
    "No SKILL.md this time: GEPA needs a task and a reflection model. Set ANTHROPIC_API_KEY (the defaults are"
    " anthropic/claude-haiku-4-5 and anthropic/claude-sonnet-5) and run the demo again; STASH_TASK_MODEL,"
    " STASH_TASK_API_BASE and STASH_REFLECTION_MODEL choose other LiteLLM models."
)
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


def run_demo(layout: Layout, admin_key: str, settings: CliSettings, console: Console) -> None:
    """Create the demo account, check the stack, import and show the samples, train, show the credit, write a skill."""
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
        trace_ids = [trace["id"] for trace in listing["traces"]]
        model = _train(client, console, trace_ids)
        _show_model(model, console)
        if model["status"] == "succeeded":
            _show_action_credit(_wait_for_action_scores(client, console, model, trace_ids), model, console)
            _write_skill(client, console, model, settings, layout.data_dir / "SKILL.md")
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


@dataclass(frozen=True)
class ScoredAction:
    """One action of a sample trace with the learned score the trained model gave it."""

    trace_title: str
    step_index: int
    actor: str
    text: str
    credit: float
    score: float


def _wait_for_action_scores(
    client: GatewayClient, console: Console, model: dict[str, Any], trace_ids: list[str]
) -> list[dict[str, Any]]:
    """Every trace's detail once the model scored each of its actions (or its run failed, or the wait ran out)."""
    deadline = time.monotonic() + SCORING_WAIT_S
    with console.status(f"Scoring every action with {model['name']}…") as status:
        while True:
            details = [client.call("GET", f"/traces/{trace_id}") for trace_id in trace_ids]
            waiting = sum(_awaits_scores(detail, model["id"]) for detail in details)
            if not waiting:
                return details
            if time.monotonic() > deadline:
                console.print(f"[yellow]{waiting} trace(s) still without action scores after {SCORING_WAIT_S:.0f}s[/]")
                return details
            done = len(details) - waiting
            status.update(f"Scoring every action with {model['name']}… ({done}/{len(details)} traces)")
            time.sleep(1.0)


def _awaits_scores(detail: dict[str, Any], model_id: str) -> bool:
    """Whether the model has yet to score an action of the trace, with no failed run saying it will not."""
    scored = {score["step_id"] for score in detail["action_scores"] if score["reward_model_id"] == model_id}
    return not _failed_runs(detail, model_id) and any(
        _is_action(step) and step["id"] not in scored for step in detail["steps"]
    )


def _is_action(step: dict[str, Any]) -> bool:
    # What the scorer scores: an assistant tool call, or an assistant message with text.
    return step["role"] == "assistant" and bool(step["tool_name"] or step["content"].strip())


def _failed_runs(detail: dict[str, Any], model_id: str) -> list[dict[str, Any]]:
    return [run for run in detail["scoring_runs"] if run["reward_model_id"] == model_id and run["status"] == "failed"]


def _scored_actions(details: list[dict[str, Any]], model_id: str) -> list[ScoredAction]:
    actions = []
    for detail in details:
        steps = {step["id"]: step for step in detail["steps"]}
        for score in detail["action_scores"]:
            step = steps.get(score["step_id"])
            if score["reward_model_id"] == model_id and step is not None:
                actions.append(_scored_action(detail["title"], step, score))
    return actions


def _scored_action(title: str, step: dict[str, Any], score: dict[str, Any]) -> ScoredAction:
    actor = f"call {step['tool_name']}" if step["tool_name"] else step["role"]
    text = step["content"] if step["content"].strip() else json.dumps(step["tool_input"] or {}, ensure_ascii=False)
    shown = _shortened(text, ACTION_TEXT_SHOWN)
    return ScoredAction(_shortened(title, TITLE_SHOWN), step["index"], actor, shown, score["credit"], score["score"])


def _shortened(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _show_action_credit(details: list[dict[str, Any]], model: dict[str, Any], console: Console) -> None:
    """The actions the model credits most and least, with one line on what credit means."""
    for detail in details:
        for run in _failed_runs(detail, model["id"]):
            console.print(f"[red]Scoring {detail['title']} failed:[/red] {run['error']}")
    ranked = sorted(_scored_actions(details, model["id"]), key=lambda action: action.credit, reverse=True)
    if not ranked:
        console.print(f"[yellow]{model['name']} published no action scores.[/yellow]")
        return
    title = f"Actions {model['name']} credits most and least"
    table = Table("trace", "step", "role/tool", "action", "credit", "score", title=title)
    top, bottom = ranked[:CREDIT_SHOWN], ranked[CREDIT_SHOWN:][-CREDIT_SHOWN:]
    _add_actions(table, top)
    if bottom:
        table.add_section()
        _add_actions(table, bottom)
    console.print(table)
    console.print(CREDIT_EXPLAINED)


def _add_actions(table: Table, actions: list[ScoredAction]) -> None:
    for action in actions:
        credit, score = f"{action.credit:+.2f}", f"{action.score:+.3f}"
        table.add_row(action.trace_title, str(action.step_index), action.actor, action.text, credit, score)


def _write_skill(
    client: GatewayClient, console: Console, model: dict[str, Any], settings: CliSettings, output: Path
) -> None:
    """GEPA against the trained model, when a task and reflection model are configured; the skill saved."""
    if not settings.gepa_configured:
        console.print(GEPA_DISABLED)
        return
    run = follow_run(client, start_run(client, model["id"], **settings.gepa_settings()), console)
    show_result(run, console, save_skill(client, run, output) if run["status"] == "succeeded" else None)
