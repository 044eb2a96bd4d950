"""The main job on the embedded profile, run against a started local stack.

It creates a user and an API key, shows every service healthy through the gateway,
imports the sample traces shipped with the CLI (several formats, tool calls, user
reactions) and prints them. Later steps (label → train → score) extend it.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from stash_cli.accounts import create_key_for, create_user_with_key
from stash_cli.client import GatewayClient
from stash_cli.stack import Layout
from stash_common.errors import AlreadyExists

DEMO_USER = "demo"
SAMPLES_DIR = Path(__file__).parent / "samples"


def demo_key() -> str:
    """A full-access key of the demo user, creating the user on the first run."""
    try:
        return create_user_with_key(DEMO_USER)[1]
    except AlreadyExists:
        return create_key_for(DEMO_USER, "demo", read_only=False)[1]


def run_demo(layout: Layout, console: Console) -> None:
    """Create the demo account, check the stack, import the samples and show them."""
    key = demo_key()
    client = GatewayClient(layout.gateway_url, key)
    try:
        _show_health(client, console)
        for path in sorted(SAMPLES_DIR.glob("*.jsonl")):
            source = path.name.split(".")[0]
            result = client.import_traces(path.read_text(encoding="utf-8"), source_id=source)
            console.print(f"Imported {result['imported']} {result['format']} trace(s) from {path.name} as {source}")
        _show_traces(client, console)
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


def _show_traces(client: GatewayClient, console: Console) -> None:
    listing = client.call("GET", "/traces", params={"limit": 100})
    table = Table("title", "format", "source", "steps", title=f"{listing['total']} traces")
    for trace in listing["traces"]:
        table.add_row(trace["title"], trace["source_format"], trace["source_name"], str(trace["step_count"]))
    console.print(table)
