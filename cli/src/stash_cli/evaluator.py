"""`stash-rm evaluator`: consent and review for accounts (API key), and the operator's controls (admin key).

Every command is one call to the gateway; answers are printed as JSON so scripts can read them. The
operator's commands name the operator (`--operator`, default: the local user name) in `X-Stash-Operator`,
which the gateway records with each action.
"""

from __future__ import annotations

import getpass
import json
import os
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

import typer
from rich.console import Console

from stash_cli.accounts import AdminClient, read_admin_key
from stash_cli.client import ApiClient, ApiError, GatewayClient
from stash_cli.settings import CliSettings
from stash_common.errors import ConfigError
from stash_common.settings import load

evaluator_app = typer.Typer(
    help="The shared evaluator: consent, review, benchmarks, snapshots, candidates and releases.", no_args_is_help=True
)
consent_app = typer.Typer(help="Your consent to improve the shared evaluator (API key).", no_args_is_help=True)
review_app = typer.Typer(help="Review comparisons as an evaluator reviewer (API key).", no_args_is_help=True)
reviewers_app = typer.Typer(help="Name or remove evaluator reviewers (admin key).", no_args_is_help=True)
evaluator_app.add_typer(consent_app, name="consent")
evaluator_app.add_typer(review_app, name="review")
evaluator_app.add_typer(reviewers_app, name="reviewers")
console = Console(soft_wrap=True)
errors = Console(stderr=True, soft_wrap=True)

Url = Annotated[str | None, typer.Option("--url", help="The gateway's base URL (STASH_URL).", show_default=False)]
Key = Annotated[str | None, typer.Option("--key", help="An API key (STASH_API_KEY).", show_default=False)]
AdminKey = Annotated[
    str | None, typer.Option("--admin-key", help="The gateway's admin key (STASH_ADMIN_KEY).", show_default=False)
]
DataDir = Annotated[Path | None, typer.Option("--data-dir", help="The embedded profile's directory (STASH_DATA_DIR).")]
Operator = Annotated[
    str | None, typer.Option("--operator", help="Who you are, recorded with the action (default: your user name).")
]


@contextmanager
def _calling(client: Any) -> Iterator[Any]:
    try:
        with closing(client):
            yield client
    except (ApiError, ConfigError) as error:
        errors.print(f"[red]error:[/red] {error}")
        raise typer.Exit(code=1) from None


def _settings(data_dir: Path | None, **given: Any) -> CliSettings:
    if data_dir is not None:
        os.environ["STASH_DATA_DIR"] = str(data_dir.resolve())
    try:
        return load(CliSettings, **{name: value for name, value in given.items() if value is not None})
    except ConfigError as error:
        errors.print(f"[red]error:[/red] {error}")
        raise typer.Exit(code=1) from None


@contextmanager
def _account(url: str | None, key: str | None) -> Iterator[ApiClient]:
    settings = _settings(None, url=url, api_key=key)
    try:
        client = GatewayClient(settings.gateway_url, settings.api_key, timeout_s=120)
    except ConfigError as error:
        errors.print(f"[red]error:[/red] {error}")
        raise typer.Exit(code=1) from None
    with _calling(client) as calling:
        yield calling


@contextmanager
def _operator(data_dir: Path | None, url: str | None, secret: str | None, operator: str | None) -> Iterator[ApiClient]:
    settings = _settings(data_dir, url=url, admin_key=secret)
    try:
        client = AdminClient(settings.gateway_url, read_admin_key(settings), timeout_s=600)
    except ConfigError as error:
        errors.print(f"[red]error:[/red] {error}")
        raise typer.Exit(code=1) from None
    client.http.headers["X-Stash-Operator"] = operator or getpass.getuser()
    with _calling(client) as calling:
        yield calling


def _print(value: Any) -> None:
    console.print_json(json.dumps(value))


@consent_app.command("show")
def consent_show(url: Url = None, key: Key = None) -> None:
    """Your consents (newest first), how many comparisons came from your data, and when you stopped."""
    with _account(url, key) as client:
        _print(client.call("GET", "/evaluator/consent"))


@consent_app.command("grant")
def consent_grant(
    text_version: Annotated[str, typer.Option("--text-version", help="The version of the consent text you read.")],
    all_sources: Annotated[bool, typer.Option("--all", help="All your traces.")] = False,
    source: Annotated[list[str] | None, typer.Option("--source", help="Only this source of yours, repeatable.")] = None,
    url: Url = None,
    key: Key = None,
) -> None:
    """Let your traces improve the shared evaluator: all of them (--all) or chosen sources (--source)."""
    body = {"text_version": text_version, "all_sources": all_sources, "source_ids": source or []}
    with _account(url, key) as client:
        _print(client.call("PUT", "/evaluator/consent", json=body))


@consent_app.command("revoke")
def consent_revoke(url: Url = None, key: Key = None) -> None:
    """Stop: nothing of yours reaches a later snapshot, benchmark or review queue."""
    with _account(url, key) as client:
        _print(client.call("DELETE", "/evaluator/consent"))


@review_app.command("queue")
def review_queue(
    limit: Annotated[int, typer.Option(help="At most this many (1..50).")] = 10, url: Url = None, key: Key = None
) -> None:
    """Comparisons waiting for your review: the context and actions A and B, without their origin."""
    with _account(url, key) as client:
        _print(client.call("GET", "/evaluator/review-queue", params={"limit": limit}))


@review_app.command("record")
def review_record(
    comparison_id: str,
    verdict: Annotated[str, typer.Argument(help="Action A against B: better, worse, tie or invalid.")],
    note: Annotated[str | None, typer.Option(help="An optional note.")] = None,
    url: Url = None,
    key: Key = None,
) -> None:
    """Record your verdict on a comparison from your queue."""
    body = {"comparison_id": comparison_id, "verdict": verdict, "note": note}
    with _account(url, key) as client:
        _print(client.call("POST", "/evaluator/reviews", json=body))


@reviewers_app.command("add")
def reviewers_add(
    user: str, data_dir: DataDir = None, url: Url = None, admin_key: AdminKey = None, operator: Operator = None
) -> None:
    """Name a user (name or id) an evaluator reviewer."""
    with _operator(data_dir, url, admin_key, operator) as client:
        _print(client.call("PUT", f"/evaluator/reviewers/{_segment(user)}"))


@reviewers_app.command("remove")
def reviewers_remove(
    user: str, data_dir: DataDir = None, url: Url = None, admin_key: AdminKey = None, operator: Operator = None
) -> None:
    """Stop a user reviewing; their reviews stay."""
    with _operator(data_dir, url, admin_key, operator) as client:
        client.call("DELETE", f"/evaluator/reviewers/{_segment(user)}")
    console.print(f"{user} no longer reviews")


@evaluator_app.command("policy")
def policy(
    agreeing_reviews: Annotated[
        int | None, typer.Option("--agreeing-reviews", help="Reviews that must agree (1..10).")
    ] = None,
    base_model: Annotated[str | None, typer.Option("--base-model", help="What candidates train from.")] = None,
    epochs: Annotated[int | None, typer.Option(help="Training epochs of a candidate (1..50).")] = None,
    max_pairs: Annotated[int | None, typer.Option("--max-pairs", help="Pairs a candidate trains on at most.")] = None,
    schedule_minutes: Annotated[
        int | None, typer.Option("--schedule-minutes", help="Minutes between scheduled candidates; 0: by hand only.")
    ] = None,
    min_new: Annotated[
        int | None, typer.Option("--min-new-comparisons", help="New admitted comparisons a scheduled candidate needs.")
    ] = None,
    primary: Annotated[str | None, typer.Option("--primary-benchmark", help="The gate's primary benchmark.")] = None,
    margin: Annotated[float | None, typer.Option(help="How much better than the release on the primary.")] = None,
    tolerance: Annotated[
        float | None, typer.Option("--slice-tolerance", help="How much worse than the release a slice may be.")
    ] = None,
    auto_release: Annotated[
        bool | None, typer.Option("--auto-release/--approval", help="Release a passing candidate without approval.")
    ] = None,
    data_dir: DataDir = None,
    url: Url = None,
    admin_key: AdminKey = None,
    operator: Operator = None,
) -> None:
    """Set the review policy (--agreeing-reviews) or change keys of the training policy; with neither, show it."""
    changes = {
        "base_model": base_model,
        "epochs": epochs,
        "max_pairs": max_pairs,
        "schedule_minutes": schedule_minutes,
        "min_new_comparisons": min_new,
        "primary_benchmark": primary,
        "margin": margin,
        "slice_tolerance": tolerance,
        "auto_release": auto_release,
    }
    changed = {key: value for key, value in changes.items() if value is not None}
    with _operator(data_dir, url, admin_key, operator) as client:
        if agreeing_reviews is not None:
            _print(client.call("PUT", "/evaluator/policy", json={"agreeing_reviews": agreeing_reviews}))
        if changed or agreeing_reviews is None:
            current = client.call("GET", "/evaluator/training-policy")
            if changed:
                body = {**current["policy"], **changed}
                current = client.call("PUT", "/evaluator/training-policy", json=body)
            _print(current)


@evaluator_app.command("train")
def train(data_dir: DataDir = None, url: Url = None, admin_key: AdminKey = None, operator: Operator = None) -> None:
    """Train a candidate now from a new corpus snapshot under the training policy."""
    with _operator(data_dir, url, admin_key, operator) as client:
        _print(client.call("POST", "/evaluator/candidates"))


@evaluator_app.command("candidates")
def candidates(data_dir: DataDir = None, url: Url = None, admin_key: AdminKey = None) -> None:
    """Every candidate, newest first: inputs, benchmark reports, and the gate's decision with its reasons."""
    with _operator(data_dir, url, admin_key, None) as client:
        _print(client.call("GET", "/evaluator/candidates"))


@evaluator_app.command("releases")
def releases(data_dir: DataDir = None, url: Url = None, admin_key: AdminKey = None) -> None:
    """Every release, newest first, with its notes, accuracy and whether the scorer has it; and the current one."""
    with _operator(data_dir, url, admin_key, None) as client:
        _print(client.call("GET", "/evaluator/releases"))


@evaluator_app.command("approve")
def approve(
    candidate_id: str, data_dir: DataDir = None, url: Url = None, admin_key: AdminKey = None, operator: Operator = None
) -> None:
    """Release a candidate that passed the gate and waits for approval."""
    with _operator(data_dir, url, admin_key, operator) as client:
        _print(client.call("POST", f"/evaluator/candidates/{_segment(candidate_id)}/approve"))


@evaluator_app.command("rollback")
def rollback(
    number: int, data_dir: DataDir = None, url: Url = None, admin_key: AdminKey = None, operator: Operator = None
) -> None:
    """Make an earlier release current again."""
    with _operator(data_dir, url, admin_key, operator) as client:
        _print(client.call("POST", f"/evaluator/releases/{number}/rollback"))


@evaluator_app.command("stats")
def stats(data_dir: DataDir = None, url: Url = None, admin_key: AdminKey = None) -> None:
    """Corpus and review statistics, the reviewers, and every disagreement."""
    with _operator(data_dir, url, admin_key, None) as client:
        _print(client.call("GET", "/evaluator/stats"))


@evaluator_app.command("collect")
def collect(data_dir: DataDir = None, url: Url = None, admin_key: AdminKey = None, operator: Operator = None) -> None:
    """Build candidate comparisons from every consented account's traces."""
    with _operator(data_dir, url, admin_key, operator) as client:
        _print(client.call("POST", "/evaluator/corpus"))


@evaluator_app.command("freeze")
def freeze(
    name: str,
    task_group: Annotated[list[str], typer.Option("--task-group", help="A task group to hold out (repeatable).")],
    data_dir: DataDir = None,
    url: Url = None,
    admin_key: AdminKey = None,
    operator: Operator = None,
) -> None:
    """Freeze a benchmark version from the admitted comparisons of these task groups (see `stats`)."""
    with _operator(data_dir, url, admin_key, operator) as client:
        _print(client.call("POST", "/evaluator/benchmarks", json={"name": name, "task_groups": task_group}))


@evaluator_app.command("benchmarks")
def benchmarks(data_dir: DataDir = None, url: Url = None, admin_key: AdminKey = None) -> None:
    """Every benchmark version with its hash, slices and size."""
    with _operator(data_dir, url, admin_key, None) as client:
        _print(client.call("GET", "/evaluator/benchmarks"))


@evaluator_app.command("snapshot")
def snapshot(data_dir: DataDir = None, url: Url = None, admin_key: AdminKey = None, operator: Operator = None) -> None:
    """Store the training corpus (admitted, consented, outside every benchmark) in object storage."""
    with _operator(data_dir, url, admin_key, operator) as client:
        _print(client.call("POST", "/evaluator/snapshots"))


@evaluator_app.command("actions")
def actions(
    limit: Annotated[int, typer.Option(help="At most this many (1..1000).")] = 100,
    data_dir: DataDir = None,
    url: Url = None,
    admin_key: AdminKey = None,
) -> None:
    """What operators did, with who and when, newest first."""
    with _operator(data_dir, url, admin_key, None) as client:
        _print(client.call("GET", "/evaluator/actions", params={"limit": limit}))


def _segment(user: str) -> str:
    return quote(user, safe="")
