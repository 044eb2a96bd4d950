"""`stash-rm`: serve one service, run the local stack, manage accounts, run the main job."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from stash_cli.accounts import AdminClient, read_admin_key
from stash_cli.backup import BackupError, export_account, import_account, is_account_export
from stash_cli.client import ApiError, GatewayClient
from stash_cli.demo import DemoFailed, demo_console, run_demo
from stash_cli.evaluator import evaluator_app
from stash_cli.hooks import AGENTS, HookError, current_home
from stash_cli.hooks import flush as flush_pending
from stash_cli.hooks import install as install_hook
from stash_cli.hooks import uninstall as uninstall_hook
from stash_cli.query_output import OutputFormat, as_csv, as_json, as_table
from stash_cli.sessions import (
    CLAUDE_CODE_DIR,
    CODEX_DIR,
    SessionFile,
    codex_index,
    newest_sessions,
    session_file,
    upload_sessions,
)
from stash_cli.settings import CliSettings
from stash_cli.skills import follow_run, runs_table, save_skill, show_result, start_run
from stash_cli.stack import (
    GRPC_SERVICES,
    Layout,
    Stack,
    StackError,
    claim,
    gateway_health,
    grpc_health,
    read_layout,
    read_restarts,
    running_stack_id,
)
from stash_common.channels import ANOTHER_STACK
from stash_common.errors import ConfigError
from stash_common.settings import SERVICE_NAMES, load

app = typer.Typer(help="Stash RM: learn reward models and better agents from AI-agent traces.", no_args_is_help=True)
users_app = typer.Typer(help="Manage users.", no_args_is_help=True)
keys_app = typer.Typer(help="Manage API keys.", no_args_is_help=True)
app.add_typer(users_app, name="users")
app.add_typer(keys_app, name="keys")
sessions_app = typer.Typer(help="Upload local agent sessions (Claude Code, Codex).", no_args_is_help=True)
app.add_typer(sessions_app, name="sessions")
hooks_app = typer.Typer(
    help="Recording hooks: Claude Code and Codex upload each session as it grows.", no_args_is_help=True
)
app.add_typer(hooks_app, name="hooks")
skills_app = typer.Typer(help="Write a SKILL.md for your agent with GEPA against a reward model.", no_args_is_help=True)
app.add_typer(skills_app, name="skills")
app.add_typer(evaluator_app, name="evaluator")
eval_app = typer.Typer(
    help="Evaluate the feedback classifier on synthetic cases with the configured LLM provider.",
    no_args_is_help=True,
)
app.add_typer(eval_app, name="eval")
reviewers_app = typer.Typer(help="Share your traces with reviewers, who read and annotate them.", no_args_is_help=True)
app.add_typer(reviewers_app, name="reviewers")
console = Console(soft_wrap=True)
errors = Console(stderr=True, soft_wrap=True)

Url = Annotated[
    str | None,
    typer.Option("--url", help="The gateway's base URL (STASH_URL; default: the local gateway).", show_default=False),
]
Key = Annotated[str | None, typer.Option("--key", help="An API key (STASH_API_KEY).", show_default=False)]
AdminKey = Annotated[
    str | None,
    typer.Option(
        "--admin-key",
        help="The gateway's admin key (STASH_ADMIN_KEY; embedded default: admin.key in the data dir).",
        show_default=False,
    ),
]
DataDir = Annotated[
    Path | None, typer.Option("--data-dir", help="Directory for the embedded profile's files (STASH_DATA_DIR).")
]


def _use_data_dir(data_dir: Path | None) -> None:
    if data_dir is not None:
        os.environ["STASH_DATA_DIR"] = str(data_dir.resolve())


def _fail(message: str) -> typer.Exit:
    errors.print(f"[red]error:[/red] {message}")
    return typer.Exit(code=1)


def _settings(**given: Any) -> CliSettings:
    """The CLI's settings; options given on the command line win over the environment."""
    try:
        return load(CliSettings, **{name: value for name, value in given.items() if value is not None})
    except ConfigError as error:
        raise _fail(str(error)) from None


@app.command()
def serve(name: Annotated[str, typer.Argument(help=f"One of: {', '.join(SERVICE_NAMES)}.")]) -> None:
    """Run one service until SIGTERM or Ctrl-C: this process becomes `python -m stash_<name>`."""
    if name not in SERVICE_NAMES:
        raise _fail(f"unknown service {name!r}; choose one of: {', '.join(SERVICE_NAMES)}")
    # exec, not import: the CLI depends on no service package, and the pid stays the same,
    # so a pod's signals reach the service itself.
    os.execv(sys.executable, [sys.executable, "-m", f"stash_{name}"])


def _run_classifier_eval(suite: str) -> None:
    # exec, not import: the suites run the trainer's own classifier, and the CLI depends on no service package.
    os.execv(sys.executable, [sys.executable, "-m", "stash_trainer.classifier_eval", suite])


@eval_app.command("feedback")
def eval_feedback() -> None:
    """Indirect criticism, approval, sarcasm, mixed outcomes, abstention, prompt injection: agreement per case type."""
    _run_classifier_eval("feedback")


@eval_app.command("learning")
def eval_learning() -> None:
    """Responses and tool calls with no annotations or user reactions: agreement per case type."""
    _run_classifier_eval("learning")


@app.command()
def up(data_dir: DataDir = None) -> None:
    """Start all six services, restart any that crashes, stop them all on Ctrl-C or SIGTERM."""
    _use_data_dir(data_dir)
    _stop_on_signals()
    stack = _start_stack()
    try:  # from here on, Ctrl-C (or SIGTERM) at any moment stops every service
        console.print(
            f"Gateway: [bold]{stack.layout.gateway_url}[/bold]  (API docs at {stack.layout.gateway_url}/docs)"
        )
        console.print(
            f"OTLP: {stack.layout.gateway_url}/api/v1/rm/otel (http/protobuf, http/json), "
            f"grpc 127.0.0.1:{stack.layout.otlp_grpc_port}"
        )
        console.print("Press Ctrl-C to stop.")
        while not _stop_requested.is_set():
            for event in stack.supervise():
                errors.print(f"[yellow]{event}[/yellow]; see {stack.layout.data_dir / 'logs'}")
            time.sleep(0.2)
        console.print("Stopping…")
    finally:
        _ignore_signals()  # a second Ctrl-C must not cut the shutdown short and orphan a service
        stack.stop()
    console.print("Stopped.")


_stop_requested = threading.Event()


def _stop_on_signals() -> None:
    """Ctrl-C and SIGTERM stop the stack, even when this process inherited them ignored (nohup, a script's `&`).

    The handler only records the request, and the loops that supervise the services check it: an exception
    raised from a handler can land inside `Popen.poll` between taking and releasing its lock, and the shutdown
    would then wait forever for that lock."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _request_stop)


def _request_stop(*_: object) -> None:
    _stop_requested.set()


def _interrupt_on_signals() -> None:
    """Ctrl-C and SIGTERM interrupt the work at once (for a demo's requests, where no service is polled)."""
    if _stop_requested.is_set():
        raise KeyboardInterrupt
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _interrupt)


def _ignore_signals() -> None:
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def _start_stack() -> Stack:
    """Claim the data directory and the ports (refused at once when another stack has them), start every
    service and wait until each one is ready as part of this stack."""
    try:
        settings = _settings()
        layout = read_layout()
        stack_id = claim(layout, embedded=settings.profile == "embedded")
    except ConfigError as error:
        raise _fail(str(error)) from None
    stack = Stack(layout, stack_id)
    stack.start()
    try:
        with console.status("Waiting for every service to report SERVING…"):
            stack.wait_healthy(stop_requested=_stop_requested)
    except StackError as error:
        _ignore_signals()
        stack.stop()
        raise _fail(str(error)) from None
    _print_health(stack.layout, stack_id)
    return stack


@app.command()
def status(data_dir: DataDir = None) -> None:
    """Show each service's health; exits 1 unless everything is SERVING."""
    _use_data_dir(data_dir)
    try:
        layout = read_layout()
    except ConfigError as error:
        raise _fail(str(error)) from None
    if not _print_health(layout, running_stack_id(layout)):
        raise typer.Exit(code=1)


def _print_health(layout: Layout, stack_id: str) -> bool:
    """Each service's readiness, checked to belong to the stack `stack_id` when one is given (ANOTHER_STACK)."""
    table = Table("service", "address", "health", "pid", "restarts")
    healthy = True
    for name in GRPC_SERVICES:
        state = grpc_health(layout.address(name), name, stack_id)
        healthy &= state == "SERVING"
        table.add_row(name, layout.address(name), _colour(state), _pid(layout.pid_file(name)), _restarts(layout, name))
    code, body = gateway_health(layout)
    gateway_state = "SERVING" if code == 200 else ("UNREACHABLE" if code is None else f"HTTP {code}")
    if code is not None and stack_id and body.get("stack_id") != stack_id:
        gateway_state = ANOTHER_STACK
    healthy &= gateway_state == "SERVING"
    gateway_pid = _pid(layout.pid_file("gateway"))
    table.add_row("gateway", layout.gateway_url, _colour(gateway_state), gateway_pid, _restarts(layout, "gateway"))
    console.print(table)
    return healthy


def _restarts(layout: Layout, name: str) -> str:
    """How often `up` restarted the service, with the exit code of its last crash ("-" outside `up`)."""
    record = read_restarts(layout, name)
    if not record:
        return "-"
    if record["last_exit_code"] is None:
        return str(record["restarts"])
    return f"{record['restarts']} (last exit {record['last_exit_code']})"


def _colour(state: str) -> str:
    return f"[green]{state}[/green]" if state == "SERVING" else f"[red]{state}[/red]"


def _pid(path: Path) -> str:
    return path.read_text().strip() if path.exists() else "-"


@contextmanager
def _admin(data_dir: Path | None, url: str | None, secret: str | None) -> Iterator[AdminClient]:
    """An admin client of the gateway; a refusal or a missing credential ends the command with its reason."""
    _use_data_dir(data_dir)
    settings = _settings(url=url, admin_key=secret)
    try:
        with closing(AdminClient(settings.gateway_url, read_admin_key(settings))) as client:
            yield client
    except (ApiError, ConfigError) as error:
        raise _fail(str(error)) from None


@users_app.command("create")
def users_create(name: str, data_dir: DataDir = None, url: Url = None, admin_key: AdminKey = None) -> None:
    """Create a user and print a full-access API key for it (shown only this once)."""
    with _admin(data_dir, url, admin_key) as admin:
        user = admin.create_user(name)
    console.print(f"user {user['name']} ({user['id']})")
    console.print(f"API key (full access, shown once): [bold]{user['key']['key']}[/bold]")


@users_app.command("disable")
def users_disable(
    user: Annotated[str, typer.Argument(help="User name or id.")],
    data_dir: DataDir = None,
    url: Url = None,
    admin_key: AdminKey = None,
) -> None:
    """Switch the reward-model API off for a user (their data stays; their keys get 403)."""
    _switch(user, False, data_dir, url, admin_key)


@users_app.command("enable")
def users_enable(
    user: Annotated[str, typer.Argument(help="User name or id.")],
    data_dir: DataDir = None,
    url: Url = None,
    admin_key: AdminKey = None,
) -> None:
    """Switch the reward-model API back on for a user."""
    _switch(user, True, data_dir, url, admin_key)


def _switch(user: str, enabled: bool, data_dir: Path | None, url: str | None, secret: str | None) -> None:
    with _admin(data_dir, url, secret) as admin:
        found = admin.switch_reward_models(user, enabled)
    console.print(f"reward models {'enabled' if enabled else 'disabled'} for {found['name']} ({found['id']})")


@keys_app.command("create")
def keys_create(
    user: Annotated[str, typer.Argument(help="User name or id.")],
    name: Annotated[str, typer.Option(help="What the key is for.")] = "cli",
    read_only: Annotated[bool, typer.Option("--read-only", help="The key can read but not change data.")] = False,
    data_dir: DataDir = None,
    url: Url = None,
    admin_key: AdminKey = None,
) -> None:
    """Create an API key for a user and print it (shown only this once)."""
    with _admin(data_dir, url, admin_key) as admin:
        key = admin.create_key(user, name, read_only)
    access = "read-only" if key["read_only"] else "full access"
    console.print(f"API key {key['id']} ({access}, shown once): [bold]{key['key']}[/bold]")


@app.command()
def demo(data_dir: DataDir = None) -> None:
    """The main job on the embedded profile: start the stack, import samples, train, score, write a skill, stop.

    Exits 1 naming the stage that failed; the stack is stopped either way."""
    _use_data_dir(data_dir)
    _stop_on_signals()
    stack = _start_stack()
    try:
        _interrupt_on_signals()
        settings = _settings()
        run_demo(stack.layout, read_admin_key(settings), settings, demo_console())
    except (ApiError, ConfigError, DemoFailed) as error:
        raise _fail(str(error)) from None
    finally:
        _ignore_signals()
        stack.stop()
    console.print("[green]Done.[/green] The stack is stopped.")


@app.command("import")
def import_files(
    files: Annotated[list[Path], typer.Argument(help="Trace files to import.", exists=True, dir_okay=False)],
    format_name: Annotated[str, typer.Option("--format", help="A format name from GET /formats, or auto.")] = "auto",
    source_id: Annotated[str | None, typer.Option("--source-id", help="Source id for every trace.")] = None,
    url: Url = None,
    key: Key = None,
) -> None:
    """Import trace files through the gateway, one request per file (each all or nothing); a single file written
    by `stash-rm export` restores that whole account instead, into an account with no traces yet."""
    if len(files) == 1 and is_account_export(files[0]):
        _restore(files[0], url, key)
        return
    failures = _upload([(path, format_name) for path in files], url, key, source_id)
    if failures:
        raise typer.Exit(code=1)


@app.command("export")
def export_file(
    output: Annotated[Path, typer.Argument(help="The JSONL file to write.", dir_okay=False)],
    url: Url = None,
    key: Key = None,
) -> None:
    """Write your whole account (traces, annotations, source names) to one file that `stash-rm import` restores."""
    partial = output.with_name(f"{output.name}.partial")  # only a finished export takes the name
    try:
        with _gateway(url, key) as client, Progress(console=console) as progress, partial.open("wb") as file:
            task = progress.add_task("Exporting traces", total=None)
            try:
                counts = export_account(client, file, lambda: progress.advance(task))
            except BackupError as error:
                raise _fail(str(error)) from None
        partial.replace(output)
    finally:
        partial.unlink(missing_ok=True)
    console.print(f"Exported {counts.line()} to {output}.")


def _restore(path: Path, url: str | None, key: str | None) -> None:
    with _gateway(url, key) as client, Progress(console=console) as progress:
        task = progress.add_task("Importing account", total=None)
        try:
            counts = import_account(client, path, lambda: progress.advance(task))
        except BackupError as error:
            raise _fail(str(error)) from None
    console.print(f"Imported {counts.line()} from {path}.")


@sessions_app.command("import")
def sessions_import(
    claude_dir: Annotated[Path, typer.Option(help="Claude Code projects directory.")] = CLAUDE_CODE_DIR,
    codex_dir: Annotated[Path, typer.Option(help="Codex sessions directory.")] = CODEX_DIR,
    url: Url = None,
    key: Key = None,
) -> None:
    """Upload every local Claude Code and Codex session (the newest snapshot of each) to /api/v1/me/transcripts."""
    sessions = newest_sessions(claude_dir, codex_dir)
    if not sessions:
        console.print(f"No sessions found under {claude_dir} or {codex_dir}.")
        return
    _upload_sessions(sessions, codex_index(codex_dir), url, key)


@sessions_app.command("upload")
def sessions_upload(
    file: Annotated[Path, typer.Argument(help="A Claude Code or Codex transcript.", exists=True, dir_okay=False)],
    agent: Annotated[str, typer.Option(help="claude_code, codex or auto.")] = "auto",
    codex_dir: Annotated[Path, typer.Option(help="Where a Codex page's bases are.")] = CODEX_DIR,
    url: Url = None,
    key: Key = None,
) -> None:
    """Upload one session transcript; a Codex history page is rebuilt from its bases first."""
    _upload_sessions([session_file(file, agent)], codex_index(codex_dir, beside=file), url, key)


def _upload_sessions(
    sessions: list[SessionFile], index: dict[str, list[Path]], url: str | None, key: str | None
) -> None:
    """Upload with a progress bar, print every problem and the summary; exit 1 when one failed or was refused."""
    with _gateway(url, key) as client, Progress(console=console) as progress:
        task = progress.add_task("Uploading sessions", total=len(sessions))
        summary = upload_sessions(client, sessions, index, lambda: progress.advance(task))
    for path, problem in summary.problems:
        errors.print(f"[red]{path}[/red]: {problem}")
    console.print(f"Sessions: {summary.line()}.")
    if summary.problems:
        raise typer.Exit(code=1)


def _upload(items: list[tuple[Path, str]], url: str | None, key: str | None, source_id: str | None) -> int:
    """Upload each file with a progress bar; returns how many failed (each failure is printed)."""
    settings = _settings(url=url, api_key=key)
    try:
        client = GatewayClient(settings.gateway_url, settings.api_key)
    except ConfigError as error:
        raise _fail(str(error)) from None
    failures = imported = 0
    with Progress(console=console) as progress:
        task = progress.add_task("Importing", total=len(items))
        for path, format_name in items:
            try:
                result = client.import_traces(path.read_text(encoding="utf-8"), format_name, source_id)
                imported += result["imported"]
            except (ApiError, UnicodeDecodeError) as error:
                failures += 1
                errors.print(f"[red]{path}[/red]: {error}")
            progress.advance(task)
    client.close()
    console.print(f"Imported {imported} trace(s) from {len(items) - failures} of {len(items)} file(s).")
    return failures


Agent = Annotated[str, typer.Argument(help=f"One of: {', '.join(AGENTS)}.")]


def _agent(agent: str) -> str:
    if agent not in AGENTS:
        raise _fail(f"unknown agent {agent!r}; one of: {', '.join(AGENTS)}")
    return agent


@hooks_app.command("install")
def hooks_install(agent: Agent, url: Url = None, key: Key = None) -> None:
    """Add a hook to the agent's settings that uploads the session transcript whenever a turn ends."""
    settings = _settings(url=url, api_key=key)
    if not settings.api_key:
        raise _fail("STASH_API_KEY is not set (an API key from `stash-rm users create`); or pass --key")
    try:
        changed = install_hook(current_home(), _agent(agent), settings.gateway_url, settings.api_key)
    except HookError as error:
        raise _fail(str(error)) from None
    console.print(f"Installed the {agent} hook in {changed}; sessions upload to {settings.gateway_url}.")


@hooks_app.command("uninstall")
def hooks_uninstall(agent: Agent) -> None:
    """Remove exactly what `hooks install` added to the agent's settings."""
    try:
        changed = uninstall_hook(current_home(), _agent(agent))
    except HookError as error:
        raise _fail(str(error)) from None
    console.print(f"Removed the {agent} hook from {changed}.")


@hooks_app.command("flush")
def hooks_flush() -> None:
    """Upload the sessions the hooks queued; what fails stays queued for the next run."""
    try:
        uploaded, kept = flush_pending(current_home())
    except (HookError, ApiError) as error:
        raise _fail(str(error)) from None
    console.print(f"Uploaded {uploaded} session(s); {kept} wait for the next run.")


@app.command()
def query(
    sql: Annotated[str, typer.Argument(help="One SELECT over your tables (traces, steps, annotations, …).")],
    output: Annotated[
        OutputFormat, typer.Option("--format", help="table (default), csv or json (the gateway's answer).")
    ] = "table",
    url: Url = None,
    key: Key = None,
) -> None:
    """Run one read-only SQL SELECT over your own data and print the rows (at most 1000)."""
    settings = _settings(url=url, api_key=key)
    try:
        with closing(GatewayClient(settings.gateway_url, settings.api_key)) as client:
            answer = client.query(sql)
    except (ApiError, ConfigError) as error:
        raise _fail(str(error)) from None
    if output == "json":
        print(as_json(answer))
    elif output == "csv":
        sys.stdout.write(as_csv(answer))
    else:
        console.print(as_table(answer))
    if answer["truncated"]:
        errors.print(f"[yellow]only the first {len(answer['rows'])} rows are shown; add a LIMIT or aggregate[/yellow]")


Output = Annotated[Path, typer.Option("--output", "-o", help="Where to save the best skill.", dir_okay=False)]


@contextmanager
def _gateway(url: str | None, key: str | None) -> Iterator[GatewayClient]:
    """A client of the gateway; a refusal or a missing key ends the command with the reason."""
    settings = _settings(url=url, api_key=key)
    try:
        with closing(GatewayClient(settings.gateway_url, settings.api_key)) as client:
            yield client
    except (ApiError, ConfigError) as error:
        raise _fail(str(error)) from None


@skills_app.command("create")
def skills_create(
    reward_model_id: Annotated[str, typer.Argument(help="A succeeded reward model of yours (the metric).")],
    task_model: Annotated[
        str | None, typer.Option(help="LiteLLM model string of your agent's model (anthropic/claude-haiku-4-5).")
    ] = None,
    task_api_base: Annotated[
        str | None, typer.Option(help="API base of an OpenAI-compatible server, for an openai/<name> task model.")
    ] = None,
    reflection_model: Annotated[
        str | None, typer.Option(help="LiteLLM model string that proposes skills (anthropic/claude-sonnet-5).")
    ] = None,
    max_metric_calls: Annotated[int | None, typer.Option(help="Budget of metric calls (40).", min=1)] = None,
    follow: Annotated[bool, typer.Option(help="Follow the run and save its skill.")] = True,
    output: Output = Path("SKILL.md"),
    url: Url = None,
    key: Key = None,
) -> None:
    """Start a GEPA run; follow it with a progress bar and save its SKILL.md unless --no-follow."""
    settings = {"task_model": task_model, "task_api_base": task_api_base, "reflection_model": reflection_model}
    with _gateway(url, key) as client:
        run = start_run(client, reward_model_id, max_metric_calls=max_metric_calls, **settings)
        console.print(f"GEPA run [bold]{run['id']}[/bold] queued ({run['task_model']}, {run['reflection_model']})")
        if follow:
            _follow(client, run, output)


@skills_app.command("follow")
def skills_follow(
    run_id: Annotated[str, typer.Argument(help="A GEPA run of yours.")],
    output: Output = Path("SKILL.md"),
    url: Url = None,
    key: Key = None,
) -> None:
    """Follow a GEPA run with a progress bar until it ends, then save its SKILL.md."""
    with _gateway(url, key) as client:
        _follow(client, client.call("GET", f"/gepa-runs/{run_id}"), output)


def _follow(client: GatewayClient, run: dict[str, Any], output: Path) -> None:
    run = follow_run(client, run, console)
    saved = save_skill(client, run, output) if run["status"] == "succeeded" else None
    show_result(run, console, saved)
    if run["status"] != "succeeded":
        raise typer.Exit(code=1)


@skills_app.command("download")
def skills_download(
    run_id: Annotated[str, typer.Argument(help="A succeeded GEPA run of yours.")],
    output: Output = Path("SKILL.md"),
    url: Url = None,
    key: Key = None,
) -> None:
    """Save a succeeded run's best skill as SKILL.md."""
    with _gateway(url, key) as client:
        run = client.call("GET", f"/gepa-runs/{run_id}")
        show_result(run, console, save_skill(client, run, output))


@skills_app.command("list")
def skills_list(url: Url = None, key: Key = None) -> None:
    """Your GEPA runs, newest first, with their best and seed scores."""
    with _gateway(url, key) as client:
        console.print(runs_table(client.call("GET", "/gepa-runs")))


@skills_app.command("delete")
def skills_delete(
    run_id: Annotated[str, typer.Argument(help="A GEPA run of yours that is not queued or running.")],
    url: Url = None,
    key: Key = None,
) -> None:
    """Delete a GEPA run with its result (a SKILL.md saved from it stays where it was saved)."""
    with _gateway(url, key) as client:
        client.call("DELETE", f"/gepa-runs/{run_id}")
    console.print(f"Deleted GEPA run {run_id}.")


def _shared(grant: dict[str, Any]) -> str:
    return "every source" if grant["all_sources"] else ", ".join(grant["source_ids"])


@reviewers_app.command("add")
def reviewers_add(
    reviewer: Annotated[str, typer.Argument(help="The reviewer's user name.")],
    source: Annotated[
        list[str] | None, typer.Option("--source", help="Share only this source id (repeatable); default: all.")
    ] = None,
    url: Url = None,
    key: Key = None,
) -> None:
    """Share your traces (all, or the --source ones) with a reviewer; run again to change what is shared."""
    with _gateway(url, key) as client:
        grant = client.call("PUT", f"/reviewers/{quote(reviewer, safe='')}", json={"source_ids": source or None})
    console.print(f"{grant['reviewer_name']} now reviews {_shared(grant)}.")


@reviewers_app.command("list")
def reviewers_list(url: Url = None, key: Key = None) -> None:
    """The reviewers you share traces with, and what each may see."""
    with _gateway(url, key) as client:
        grants = client.call("GET", "/reviewers")
    if not grants:
        console.print("You share no traces; add a reviewer with `stash-rm reviewers add NAME`.")
    for grant in grants:
        console.print(f"{grant['reviewer_name']}\t{_shared(grant)}")


@reviewers_app.command("remove")
def reviewers_remove(
    reviewer: Annotated[str, typer.Argument(help="The reviewer's user name.")],
    url: Url = None,
    key: Key = None,
) -> None:
    """Stop sharing your traces with a reviewer, effective on their next request."""
    with _gateway(url, key) as client:
        client.call("DELETE", f"/reviewers/{quote(reviewer, safe='')}")
    console.print(f"{reviewer} no longer reviews your traces.")
