"""Launching real service processes for tests, on free ports, in a private data directory."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx

from stash_common.channels import check_health, open_channel

GRPC_SERVICES = ("ingest", "labeler", "trainer", "scorer", "gepa")


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """`count` different TCP ports nothing listens on right now. All are held bound until all are chosen:
    a port released at once may be handed out again by the next bind to port 0, and two services of one
    stack given the same port make the second one refuse to start."""
    with refused_addresses(count) as addresses:
        return [int(address.rsplit(":", 1)[1]) for address in addresses]


@contextmanager
def refused_addresses(count: int) -> Iterator[list[str]]:
    """`count` addresses that refuse connections for as long as the block runs: each port is bound and
    never listened on, so no other process (a stack on the default ports, say) can take it meanwhile."""
    with ExitStack() as sockets:
        bound = [sockets.enter_context(socket.socket()) for _ in range(count)]
        for sock in bound:
            sock.bind(("127.0.0.1", 0))
        yield [f"127.0.0.1:{sock.getsockname()[1]}" for sock in bound]


def wait_for_http(url: str, timeout_s: float = 30.0) -> None:
    """Poll `url` until it answers at all, or fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            httpx.get(url, timeout=1.0)
            return
        except httpx.TransportError:
            time.sleep(0.1)
    raise TimeoutError(f"{url} did not answer within {timeout_s}s")


def wait_for_health(address: str, expected: str = "SERVING", timeout_s: float = 30.0) -> None:
    """Poll a gRPC server's health until it reports `expected`."""
    channel = open_channel(address)
    deadline = time.monotonic() + timeout_s
    try:
        while (state := check_health(channel, timeout_s=1.0)) != expected:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{address} is {state}, not {expected}, after {timeout_s}s")
            time.sleep(0.1)
    finally:
        channel.close()


def stack_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """An environment for a whole local stack on free ports, in `data_dir`."""
    gateway_port, otlp_grpc_port, *service_ports = free_ports(2 + len(GRPC_SERVICES))
    env = {
        **os.environ,
        "STASH_DATA_DIR": str(data_dir),
        "STASH_GATEWAY_PORT": str(gateway_port),
        "STASH_GATEWAY_OTLP_GRPC_PORT": str(otlp_grpc_port),
        **extra,
    }
    for name, port in zip(GRPC_SERVICES, service_ports, strict=True):
        env[f"STASH_{name.upper()}_PORT"] = str(port)
        env[f"STASH_{name.upper()}_ADDRESS"] = f"127.0.0.1:{port}"
    return env


def start_service(name: str, env: dict[str, str]) -> subprocess.Popen[str]:
    """`python -m stash_<name>` as its own process with `env` added to ours, output captured."""
    return subprocess.Popen(
        [sys.executable, "-m", f"stash_{name}"],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def stash_rm(
    *args: str, env: dict[str, str] | None = None, timeout_s: float = 60.0
) -> subprocess.CompletedProcess[str]:
    """Run the `stash-rm` command line to completion."""
    return subprocess.run(
        [sys.executable, "-m", "stash_cli", *args],
        env=env or dict(os.environ),
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
