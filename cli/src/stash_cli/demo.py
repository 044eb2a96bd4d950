"""The main job on the embedded profile, run against a started local stack.

It takes the `demo` user (created on the first run) with a fresh key, shows every service healthy through
the gateway, imports the sample traces shipped with the CLI (several formats, tool calls, user
reactions) and a hundred generated practice traces (`practice.py`: seven samples alone teach a model
nothing measurable), waits for the labeler to label and score each one, prints every sample with its
automatic score and outcome, then trains a reward model on the traces' automatic action credit (the
packaged MiniLM, on this machine's CPU or GPU, with the API's default settings), prints its metrics in
words with their sample counts and intervals, waits until the scores the training
job computed for every action are published, and prints the actions the model credits most and least.
Last, when a task and a reflection model are configured (`ANTHROPIC_API_KEY` for the defaults, or
`STASH_TASK_MODEL` and friends), GEPA writes a SKILL.md against the model; otherwise the demo prints
the setting that enables it. It ends by saying where to look at what it made.

Running it again gives the same result as once: the samples carry stable ids (an import updates them),
the earlier demo key, reward model and GEPA runs are replaced, never kept beside the new ones. A stage
that fails raises `DemoFailed` naming it, and the caller stops the stack and exits non-zero.

The scores are read back through GET /traces/{id}, the way any client sees them, rather than taken
from the trainer: what the demo prints is what the platform stored.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from stash_cli.accounts import AdminClient
from stash_cli.client import ApiError, GatewayClient
from stash_cli.practice import practice_jsonl
from stash_cli.settings import CliSettings
from stash_cli.skills import follow_run, save_skill, show_result, start_run
from stash_cli.stack import Layout
from stash_cli.waiting import Waiting

DEMO_USER = "demo"
DEMO_KEY = "demo"
FIRST_KEY = "default"  # the name of the key the gateway gives a new user
DEMO_MODEL = "demo reward model"
PRACTICE_SOURCE = "practice"
SAMPLES_DIR = Path(__file__).parent / "samples"
PIPED_WIDTH = 200  # columns of the demo's tables in a file or CI log, where no terminal says how wide
POLL_S = 1.0
EVALUATION_WAIT_S = 180.0
TRAINING_WAIT_S = 1800.0
SCORING_WAIT_S = 300.0
CREDIT_SHOWN = 5
ACTION_TEXT_SHOWN = 50
TITLE_SHOWN = 80  # a derived title's own limit: titles stay whole
ACTIVE = ("queued", "running")
CREDIT_EXPLAINED = (
    "credit (−1…+1): how much this model prefers the action over its training reference; 0 is the"
    " reference mean, and credits compare within one model. raw score: the model's unscaled reward."
)
GEPA_DISABLED = (
    "No SKILL.md this time: GEPA needs a task and a reflection model. Set ANTHROPIC_API_KEY (the defaults are"
    " anthropic/claude-haiku-4-5 and anthropic/claude-sonnet-5) and run the demo again; STASH_TASK_MODEL,"
    " STASH_TASK_API_BASE and STASH_REFLECTION_MODEL choose other LiteLLM models."
)
AUTOMATIC_CREDIT = {"input_version": 3, "annotation_source": "automatic"}


class DemoFailed(Exception):
    """A stage of the demo failed; `stage` names it ("training the reward model"), `reason` says why."""

    def __init__(self, stage: str, reason: str) -> None:
        super().__init__(f"the demo failed while {stage}: {reason}")
        self.stage = stage
        self.reason = reason


@contextmanager
def stage(name: str) -> Iterator[None]:
    """A stage of the demo: a refusal of the gateway inside it fails the demo naming the stage."""
    try:
        yield
    except ApiError as error:
        raise DemoFailed(name, str(error)) from None


def demo_console() -> Console:
    """The demo's console: the terminal's width, or wide enough for its tables when piped (unless COLUMNS says)."""
    piped = not sys.stdout.isatty() and "COLUMNS" not in os.environ
    return Console(soft_wrap=True, width=PIPED_WIDTH if piped else None)


def run_demo(layout: Layout, admin_key: str, settings: CliSettings, console: Console) -> None:
    """Take the demo account, check the stack, import and show the samples, train, show the credit, write a skill."""
    with stage("taking the demo account"), closing(AdminClient(layout.gateway_url, admin_key)) as admin:
        key = demo_key(admin, layout.gateway_url)
    skill: Path | None = None
    with closing(GatewayClient(layout.gateway_url, key)) as client:
        with stage("checking the services"):
            _show_health(client, console)
        with stage("importing the samples"):
            trace_ids = _import_samples(client, console)
            practice_ids = _import_practice(client, console)
        evaluated = wait_for_evaluations(client, console, trace_ids + practice_ids)
        _show_traces([trace for trace in evaluated if trace["id"] in trace_ids], console)
        _show_practice([trace for trace in evaluated if trace["id"] in practice_ids], console)
        with stage("replacing the earlier demo model"):
            _replace_earlier_demo(client, console)
        model = _train(client, console, trace_ids + practice_ids)
        show_model(model, console)
        _show_action_credit(_wait_for_action_scores(client, console, model, trace_ids), model, console)
        if settings.gepa_configured:
            skill = _write_skill(client, console, model, settings, layout.data_dir / "SKILL.md")
        else:
            console.print(GEPA_DISABLED)
    _show_where_to_look(layout, key, skill, console)


def demo_key(admin: AdminClient, gateway_url: str) -> str:
    """A new full-access key of the demo user (created on the first run); the demo's earlier keys are revoked."""
    try:
        return str(admin.create_user(DEMO_USER)["key"]["key"])
    except ApiError as error:
        if error.status_code != HTTPStatus.CONFLICT:  # 409: the demo user exists from an earlier run
            raise
    created = admin.create_key(DEMO_USER, DEMO_KEY, read_only=False)
    with closing(GatewayClient(gateway_url, created["key"])) as client:
        for earlier in client.call("GET", "/keys"):
            if earlier["name"] in (DEMO_KEY, FIRST_KEY) and earlier["id"] != created["id"]:
                client.call("DELETE", f"/keys/{earlier['id']}")
    return str(created["key"])


def _show_health(client: GatewayClient, console: Console) -> None:
    services = client.health()["services"]
    down = [f"{name} is {state}" for name, state in services.items() if state != "SERVING"]
    if down:
        raise DemoFailed("checking the services", f"the gateway's /healthz says {', '.join(down)}")
    me = client.call("GET", "/me")
    console.print(f"The gateway's /healthz reports all {len(services)} services SERVING.")
    console.print(f"Signed in through the API as [bold]{me['user_name']}[/bold] ({me['user_id']}).")


def _import_samples(client: GatewayClient, console: Console) -> list[str]:
    """Import every sample file (its traces carry ids, so a second run updates them); the traces' ids."""
    trace_ids: list[str] = []
    for path in sorted(SAMPLES_DIR.glob("*.jsonl")):
        source = path.name.split(".")[0]
        result = client.import_traces(path.read_text(encoding="utf-8"), source_id=source)
        trace_ids += result["trace_ids"]
        console.print(f"Imported {result['imported']} {words(result['format'])} trace(s) from {path.name} as {source}")
    return trace_ids


def _import_practice(client: GatewayClient, console: Console) -> list[str]:
    """Import the generated practice traces (stable ids: a second run updates them); their ids."""
    result = client.import_traces(practice_jsonl(), "stash", source_id=PRACTICE_SOURCE)
    console.print(
        f"Imported {result['imported']} synthetic practice traces (a support desk, generated by"
        f" stash_cli.practice) as {PRACTICE_SOURCE}, so that the reward model has enough pairs to learn from"
        " and to be measured on"
    )
    return list(result["trace_ids"])


def wait_for_evaluations(client: GatewayClient, console: Console, trace_ids: list[str]) -> list[dict[str, Any]]:
    """The sample traces' summaries once the labeler has labeled and scored each one; DemoFailed naming the stage
    when time runs out or the gateway refuses or stops answering meanwhile."""
    name = "labeling the samples"
    deadline = time.monotonic() + EVALUATION_WAIT_S
    with stage(name), Waiting(console, "Labeling and scoring every step") as wait:
        while True:
            listing = client.call("GET", "/traces", params={"limit": 500})
            samples = [trace for trace in listing["traces"] if trace["id"] in trace_ids]
            waiting = sum(trace["evaluation"] is None for trace in samples)
            if not waiting and len(samples) == len(trace_ids):
                return samples
            if time.monotonic() > deadline:
                reason = f"{waiting} of {len(trace_ids)} sample traces have no labels after {EVALUATION_WAIT_S:.0f} s"
                raise DemoFailed(name, f"{reason}; the labeler's log says why")
            wait.update(f"{len(trace_ids) - waiting} of {len(trace_ids)} traces done")
            time.sleep(POLL_S)


def _show_traces(traces: list[dict[str, Any]], console: Console) -> None:
    table = _table("trace", "format", "source", "steps", "score (−1…+1)", "outcome")
    for trace in traces:
        evaluation = trace["evaluation"] or {}
        table.add_row(
            trace["title"],
            words(trace["source_format"]),
            trace["source_name"],
            str(trace["step_count"]),
            signed(evaluation.get("score")),
            words(evaluation.get("outcome") or "not evaluated"),
        )
    console.print(
        f"The {len(traces)} sample traces, each with the automatic trace score and the outcome its labels give:"
    )
    console.print(table)


def _show_practice(traces: list[dict[str, Any]], console: Console) -> None:
    outcomes = Counter(words((trace["evaluation"] or {}).get("outcome") or "not evaluated") for trace in traces)
    shown = ", ".join(f"{number} {outcome}" for outcome, number in sorted(outcomes.items()))
    console.print(f"The {len(traces)} practice traces, by the outcome their labels give: {shown}.")


def _replace_earlier_demo(client: GatewayClient, console: Console) -> None:
    """Delete the demo reward model of an earlier run and its GEPA runs (waiting for any still running)."""
    earlier = [model for model in client.call("GET", "/reward-models") if model["name"] == DEMO_MODEL]
    if not earlier:
        return
    ids = {model["id"] for model in earlier}
    runs = [run for run in client.call("GET", "/gepa-runs") if run["reward_model_id"] in ids]
    for path in [f"/gepa-runs/{run['id']}" for run in runs] + [f"/reward-models/{model_id}" for model_id in ids]:
        _settled(client, console, path)
        client.call("DELETE", path)
    console.print(f"Replaced the earlier run's {DEMO_MODEL} ({len(runs)} GEPA run(s) with it).")


def _settled(client: GatewayClient, console: Console, path: str) -> dict[str, Any]:
    """The model or GEPA run at `path` once it is no longer queued or running."""
    found: dict[str, Any] = client.call("GET", path)
    if found["status"] not in ACTIVE:
        return found
    with Waiting(console, f"Waiting for the earlier run's {path.split('/')[1]} {found['id']} to finish") as wait:
        while found["status"] in ACTIVE:
            time.sleep(POLL_S)
            found = client.call("GET", path)
            wait.update(found["status"])
    return found


def _train(client: GatewayClient, console: Console, trace_ids: list[str]) -> dict[str, Any]:
    """Train a reward model on the samples; the succeeded model, or DemoFailed with the trainer's reason."""
    name = "training the reward model"
    body = {"name": DEMO_MODEL, "trace_ids": trace_ids, "training_config": AUTOMATIC_CREDIT}
    with stage(name):
        model = client.call("POST", "/reward-models", json=body)
        deadline = time.monotonic() + TRAINING_WAIT_S
        with Waiting(console, "Training a reward model on the samples") as wait:
            while model["status"] in ACTIVE and time.monotonic() < deadline:
                time.sleep(POLL_S)
                model = client.call("GET", f"/reward-models/{model['id']}")
                wait.update(_training_progress(model))
    if model["status"] != "succeeded":
        minutes = f"still {model['status']} after {TRAINING_WAIT_S / 60:.0f} minutes"
        raise DemoFailed(name, model["error"] or minutes)
    return dict(model)


def _training_progress(model: dict[str, Any]) -> str:
    progress = model["progress"]
    if model["status"] == "queued":
        return "waiting for a worker"
    if not progress.get("total_steps"):
        return "preparing the training pairs and loading the base model"
    loss = f", loss {progress['loss']:.3f}" if isinstance(progress.get("loss"), float) else ""
    return f"step {progress['step']} of {progress['total_steps']}{loss}"


def show_model(model: dict[str, Any], console: Console) -> None:
    table = _table("what", "value")
    for name, value in model_lines(model):
        table.add_row(name, value)
    console.print(f"Reward model {model['name']}, trained on {count(model['num_pairs'], 'preference pair')}:")
    console.print(table)
    warning = model["quality"]["loss"]["warning"]
    if warning:
        console.print(f"[bold yellow]Warning:[/bold yellow] {warning}")


def model_lines(model: dict[str, Any]) -> list[tuple[str, str]]:
    """A model's metrics in words, as the gateway reads them (`quality`): each with the samples behind it."""
    metrics, quality, num_pairs = model["metrics"], model["quality"], model["num_pairs"]
    built = f" of {num_pairs} built" if num_pairs is not None else ""
    action_pairs = metrics.get("action_train_pairs") or 0
    return [
        ("Held-out accuracy", quality["eval"]["summary"]),
        ("Action accuracy", quality["action_eval"]["summary"]),
        ("Trained on", f"{count(metrics['train_pairs'], 'pair')} ({action_pairs} compare two actions){built}"),
        (
            "Held out",
            f"{count(metrics['eval_pairs'], 'pair')} from whole traces the model never saw;"
            f" {count(metrics['excluded_cross_trace_pairs'], 'pair')} left out because they span both sides",
        ),
        ("Final training loss", quality["loss"]["summary"]),
        ("Run", f"{count(metrics['epochs'], 'epoch')} on {metrics['device']} in {metrics['seconds']:.0f} s"),
    ]


@dataclass(frozen=True)
class ScoredAction:
    """One action of a sample trace with the learned score the trained model gave it."""

    trace_title: str
    step_number: int
    actor: str
    text: str
    credit: float
    score: float


def _wait_for_action_scores(
    client: GatewayClient, console: Console, model: dict[str, Any], trace_ids: list[str]
) -> list[dict[str, Any]]:
    """Every sample's detail once the model scored each of its actions; DemoFailed if a run failed or time ran out."""
    name = "scoring every action"
    deadline = time.monotonic() + SCORING_WAIT_S
    with stage(name), Waiting(console, f"Scoring every action with {model['name']}") as wait:
        while True:
            details = [client.call("GET", f"/traces/{trace_id}") for trace_id in trace_ids]
            failures = [f"{d['title']}: {run['error']}" for d in details for run in _failed_runs(d, model["id"])]
            if failures:
                raise DemoFailed(name, "; ".join(failures))
            waiting = sum(_awaits_scores(detail, model["id"]) for detail in details)
            if not waiting:
                return details
            if time.monotonic() > deadline:
                raise DemoFailed(name, f"{waiting} trace(s) still without action scores after {SCORING_WAIT_S:.0f} s")
            wait.update(f"{len(details) - waiting} of {len(details)} traces done")
            time.sleep(POLL_S)


def _awaits_scores(detail: dict[str, Any], model_id: str) -> bool:
    """Whether the model has yet to score an action of the trace."""
    scored = {score["step_id"] for score in detail["action_scores"] if score["reward_model_id"] == model_id}
    return any(_is_action(step) and step["id"] not in scored for step in detail["steps"])


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
    actor = f"call {step['tool_name']}" if step["tool_name"] else "message"
    text = step["content"] if step["content"].strip() else json.dumps(step["tool_input"] or {}, ensure_ascii=False)
    return ScoredAction(
        _shortened(title, TITLE_SHOWN),
        step["index"] + 1,
        actor,
        _shortened(text, ACTION_TEXT_SHOWN),
        score["credit"],
        score["score"],
    )


def _shortened(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _show_action_credit(details: list[dict[str, Any]], model: dict[str, Any], console: Console) -> None:
    """The actions the model credits most and least, with a line on what credit and raw score mean."""
    ranked = sorted(_scored_actions(details, model["id"]), key=lambda action: action.credit, reverse=True)
    table = _table("trace", "step", "action", "what it did", "credit (−1…+1)", "raw score")
    top, bottom = ranked[:CREDIT_SHOWN], ranked[CREDIT_SHOWN:][-CREDIT_SHOWN:]
    _add_actions(table, top)
    if bottom:
        table.add_section()
        _add_actions(table, bottom)
    console.print(f"The actions {model['name']} credits most and least, of {count(len(ranked), 'scored action')}:")
    console.print(table)
    console.print(CREDIT_EXPLAINED)


def _add_actions(table: Table, actions: list[ScoredAction]) -> None:
    for action in actions:
        credit, score = signed(action.credit), signed(action.score, 3)
        table.add_row(action.trace_title, str(action.step_number), action.actor, action.text, credit, score)


def _write_skill(
    client: GatewayClient, console: Console, model: dict[str, Any], settings: CliSettings, output: Path
) -> Path:
    """GEPA against the trained model, its best skill saved to `output`; DemoFailed when the run failed."""
    name = "writing a SKILL.md with GEPA"
    with stage(name):
        run = follow_run(client, start_run(client, model["id"], **settings.gepa_settings()), console)
        if run["status"] != "succeeded":
            raise DemoFailed(name, run["error"] or f"the run is still {run['status']}")
        saved = save_skill(client, run, output)
    show_result(run, console, saved)
    return saved


def _show_where_to_look(layout: Layout, key: str, skill: Path | None, console: Console) -> None:
    console.print()
    console.print("To look at what the demo made, start the stack again and open the web UI:")
    console.print(f"  stash-rm up --data-dir {layout.data_dir}")
    console.print(f"  then open {layout.gateway_url}/ and sign in with the demo user's API key (full access):")
    console.print(f"  [bold]{key}[/bold]")
    if skill is not None:
        console.print(f"The SKILL.md GEPA wrote is at {skill}")


def _table(*headers: str) -> Table:
    """A table whose cells wrap rather than end in "…" when the output is narrower than its rows."""
    table = Table()
    for header in headers:
        table.add_column(header, overflow="fold")
    return table


def signed(value: float | None, digits: int = 2) -> str:
    """A signed number ("+0.35", "−1.00", "0.00"; never "−0.00"), or — for none."""
    if value is None:
        return "—"
    text = f"{abs(value):.{digits}f}"
    if float(text) == 0:
        return text
    return f"+{text}" if value > 0 else f"−{text}"


def words(name: str) -> str:
    """A snake_case name as words ("partial_success" → "partial success")."""
    return name.replace("_", " ")


def count(number: int | None, noun: str) -> str:
    """'1 pair', '3 pairs'."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"
