"""GEPA runs from the command line: start one, follow it with a progress bar, save its SKILL.md.

`stash-rm skills create` and the main job (`stash-rm demo`) share these: a run is followed until it
settles, its metric calls used against its budget on the bar, then the best skill is saved and its
score shown next to the seed's, so a reader sees what GEPA gained.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from stash_cli.client import GatewayClient
from stash_cli.waiting import Waiting

POLL_S = 1.0
FOLLOW_WAIT_S = 2 * 60 * 60.0


def start_run(client: GatewayClient, reward_model_id: str, **settings: Any) -> dict[str, Any]:
    """POST /gepa-runs with the settings given (unset ones take the server's defaults)."""
    body = {"reward_model_id": reward_model_id, **{key: value for key, value in settings.items() if value is not None}}
    return dict(client.call("POST", "/gepa-runs", json=body))


def follow_run(client: GatewayClient, run: dict[str, Any], console: Console) -> dict[str, Any]:
    """The run once it succeeded or failed: a bar of metric calls used on a terminal, progress lines when piped."""
    deadline = time.monotonic() + FOLLOW_WAIT_S
    with _run_progress(console, run) as show:
        while run["status"] in ("queued", "running") and time.monotonic() < deadline:
            time.sleep(POLL_S)
            run = client.call("GET", f"/gepa-runs/{run['id']}")
            show(run)
    if run["budget_warning"]:
        console.print(f"[yellow]warning:[/yellow] {run['budget_warning']}")
    return run


@contextmanager
def _run_progress(console: Console, run: dict[str, Any]) -> Iterator[Callable[[dict[str, Any]], None]]:
    """Shows a run's progress: a bar on a terminal (a Progress draws nothing into a file), lines otherwise."""
    if not console.is_terminal:
        with Waiting(console, "GEPA is writing a skill") as wait:
            yield lambda run: wait.update(
                f"{run['status']}, {run['progress'] or 0} of {run['max_metric_calls']} metric calls"
            )
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        task = progress.add_task(_stage(run), total=run["max_metric_calls"])
        yield lambda run: progress.update(task, description=_stage(run), completed=run["progress"] or 0)


def _stage(run: dict[str, Any]) -> str:
    if run["status"] == "queued":
        return "GEPA: queued"
    if run["status"] == "running" and run["progress"] is None:
        return "GEPA: preparing examples"
    return f"GEPA: metric calls ({run['status']})"


def save_skill(client: GatewayClient, run: dict[str, Any], output: Path) -> Path:
    """Download a succeeded run's SKILL.md to `output`."""
    output.write_text(client.text(f"/gepa-runs/{run['id']}/skill"), encoding="utf-8")
    return output


def show_result(run: dict[str, Any], console: Console, saved: Path | None) -> None:
    """What GEPA gained over the seed skill, the examples that failed, and where the skill went."""
    if run["status"] != "succeeded":
        console.print(f"[red]GEPA run {run['id']} {run['status']}:[/red] {run['error'] or 'still running'}")
        return
    table = Table("skill", "score (0…1, reward model)", title=f"GEPA run {run['id']}: {run['skill_name']}")
    table.add_row("seed", f"{run['seed_score']:.3f}")
    table.add_row("best", f"{run['best_score']:.3f}")
    candidates = len(run["candidates"])
    used = f"{run['progress']} of {run['max_metric_calls']} metric calls (GEPA finishes the round it is in)"
    table.caption = f"{candidates} candidate{'' if candidates == 1 else 's'}; {used}"
    console.print(table)
    console.print(f"[bold]{run['skill_name']}[/bold]: {run['skill_description']}")
    for failure in run["example_failures"]:
        console.print(f"[yellow]example {failure['trace_id']} failed:[/yellow] {failure['error']}")
    if saved is not None:
        console.print(f"Saved the best skill to [bold]{saved}[/bold]")


def runs_table(runs: list[dict[str, Any]]) -> Table:
    """The caller's GEPA runs, newest first."""
    table = Table("id", "status", "reward model", "task model", "calls", "best", "seed", "skill", title="GEPA runs")
    for run in runs:
        table.add_row(
            run["id"],
            run["status"],
            run["reward_model_id"],
            run["task_model"],
            f"{run['progress'] or 0}/{run['max_metric_calls']}",
            _score(run["best_score"]),
            _score(run["seed_score"]),
            run["skill_name"] or "—",
        )
    return table


def _score(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"
