"""The main job on the embedded profile, run against a started local stack.

Today it creates a user and an API key and shows every service healthy through the
gateway; later steps (import sample traces → label → train → score) extend it.
"""

from __future__ import annotations

import httpx
from rich.console import Console
from rich.table import Table

from stash_cli.accounts import create_key_for, create_user_with_key
from stash_cli.stack import Layout
from stash_common.errors import AlreadyExists

DEMO_USER = "demo"


def demo_key() -> str:
    """A full-access key of the demo user, creating the user on the first run."""
    try:
        return create_user_with_key(DEMO_USER)[1]
    except AlreadyExists:
        return create_key_for(DEMO_USER, "demo", read_only=False)[1]


def run_demo(layout: Layout, console: Console) -> None:
    """Create the demo account, then show what the gateway reports about the stack and the caller."""
    key = demo_key()
    with httpx.Client(base_url=layout.gateway_url, headers={"Authorization": f"Bearer {key}"}) as client:
        health = client.get("/healthz").raise_for_status().json()
        me = client.get("/api/v1/rm/me").raise_for_status().json()
    table = Table("service", "health", title="Gateway /healthz")
    for name, state in health["services"].items():
        table.add_row(name, state)
    console.print(table)
    console.print(f"Signed in through the API as [bold]{me['user_name']}[/bold] ({me['user_id']}).")
    console.print(f"API key for this stack (full access): [bold]{key}[/bold]")
