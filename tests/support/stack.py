"""A whole local stack (`stash-rm up`) as tests start it: six real processes on free ports."""

from __future__ import annotations

import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from support.processes import stack_env, stash_rm


class RunningStack:
    """A `stash-rm up` process and what it was started with."""

    def __init__(
        self, data_dir: Path, env: dict[str, str], process: subprocess.Popen[str], user_suffix: str = ""
    ) -> None:
        self.data_dir = data_dir
        self.env = env
        self.process = process
        self.user_suffix = user_suffix
        self.gateway_url = f"http://127.0.0.1:{env['STASH_GATEWAY_PORT']}"
        self.api_url = f"{self.gateway_url}/api/v1/rm"

    def for_module(self, tag: str) -> RunningStack:
        """This stack as one of the test modules that share it: the users it creates are named `<name>-<tag>`,
        so that two modules asking for `alice` get two users."""
        return RunningStack(self.data_dir, self.env, self.process, user_suffix=f"-{tag}")

    def pid(self, service: str) -> int:
        """The process id `up` recorded for a service."""
        return int((self.data_dir / "run" / f"{service}.pid").read_text())

    def create_user(self, name: str) -> str:
        """A new user through the CLI (named `name` and the stack's user suffix); returns its full-access key."""
        created = stash_rm("users", "create", f"{name}{self.user_suffix}", env=self.env)
        assert created.returncode == 0, created.stderr
        return created.stdout.split("shown once): ")[1].split()[0]

    def client(self, key: str) -> httpx.Client:
        """An HTTP client for the REST API with the key as bearer."""
        return httpx.Client(base_url=self.api_url, headers={"Authorization": f"Bearer {key}"}, timeout=120)


def read_until(process: subprocess.Popen[str], marker: str, timeout_s: float = 90.0) -> str:
    """Read the process's output until a line contains `marker`."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout_s
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line and process.poll() is not None:
            break
        seen.append(line)
        if marker in line:
            return "".join(seen)
    raise AssertionError(f"{marker!r} never printed; output so far:\n{''.join(seen)}")


def cluster_env(postgres_url: str, redis_url: str) -> dict[str, str]:
    """The cluster profile with every service's PostgreSQL and Redis settings (one database for all),
    and the admin key an operator would set from a Secret, given to the gateway and the CLI alike."""
    admin_key = secrets.token_urlsafe(32)
    env = {"STASH_PROFILE": "cluster", "STASH_GATEWAY_ADMIN_KEY": admin_key, "STASH_ADMIN_KEY": admin_key}
    for service in ("gateway", "ingest", "labeler", "trainer", "scorer", "gepa"):
        env[f"STASH_{service.upper()}_DATABASE_URL"] = postgres_url
    for service in ("gateway", "labeler", "trainer", "scorer", "gepa"):
        env[f"STASH_{service.upper()}_REDIS_URL"] = redis_url
    return env


def launch_up(env: dict[str, str], ignoring: tuple[signal.Signals, ...] = ()) -> subprocess.Popen[str]:
    """`stash-rm up` as a child with its output captured, inheriting `ignoring` as ignored signals (as from nohup).

    A shell ignores them and execs `up` (ignored signals survive exec): Python code between fork and
    exec, a `preexec_fn`, can abort the child of a process with live gRPC channels.
    """
    command = [sys.executable, "-m", "stash_cli", "up"]
    if ignoring:
        names = " ".join(signum.name.removeprefix("SIG") for signum in ignoring)
        command = ["/bin/sh", "-c", f'trap "" {names}; exec "$@"', "sh", *command]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@contextmanager
def running_stack(data_dir: Path, **env: str) -> Iterator[RunningStack]:
    """`stash-rm up` until the gateway URL is printed; Ctrl-C afterwards."""
    full_env = stack_env(data_dir, COLUMNS="200", **env)
    process = launch_up(full_env)
    try:
        read_until(process, "Gateway:")
        yield RunningStack(data_dir, full_env, process)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            process.communicate(timeout=60)
