"""The local stack: all six services as separate processes on this machine.

`stash-rm up` and `stash-rm demo` start it; every service runs the same code as in the
cluster, as `python -m stash_<service>`, with its addresses, ports and data directory
passed through the environment.

`up` supervises its children: a service that exits is started again after a backoff that doubles
with every crash in a row (0.5 s up to 30 s), and each restart is counted in `run/<service>.restarts`
for `stash-rm status`. On Linux every child also asks the kernel for SIGTERM when `up` itself dies,
so not even a `kill -9` of `up` leaves a service behind.

One stack per data directory and per port (`stash_common.instance`, `stash_common.listeners`): `up` holds
the data directory's stack lock for its whole life and checks every port before it starts anything, so a
second `up` (or `demo`) is refused at once with a message naming what holds the directory or the port.
It generates a stack id for its services, and waits until each of them reports ready as part of this stack.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from stash_cli.settings import CliSettings
from stash_common.channels import READINESS_NAMES, check_health, open_channel
from stash_common.instance import STACK, check_unheld, hold, new_stack_id, running_holder
from stash_common.listeners import check_free
from stash_common.parent_death import die_with_parent_env
from stash_common.settings import DEFAULT_GRPC_PORTS, load

GRPC_SERVICES: tuple[str, ...] = tuple(DEFAULT_GRPC_PORTS)
ALL_SERVICES: tuple[str, ...] = (*GRPC_SERVICES, "gateway")
FIRST_RESTART_DELAY_S = 0.5
LONGEST_RESTART_DELAY_S = 30.0
STABLE_AFTER_S = 30.0  # a service that ran this long before exiting starts again after the first delay


class StackError(RuntimeError):
    """The stack could not start: a service exited or never became healthy."""


@dataclass(frozen=True)
class Layout:
    """Where each service of a local stack listens, and where it keeps its files."""

    data_dir: Path
    grpc_ports: dict[str, int]
    gateway_port: int
    otlp_grpc_port: int

    @property
    def gateway_url(self) -> str:
        """The gateway's base URL, as reached on this machine."""
        return f"http://127.0.0.1:{self.gateway_port}"

    def ports(self) -> dict[str, int]:
        """Every port the stack listens on, by the variable that sets it."""
        ports = {f"STASH_{name.upper()}_PORT": port for name, port in self.grpc_ports.items()}
        return {**ports, "STASH_GATEWAY_PORT": self.gateway_port, "STASH_GATEWAY_OTLP_GRPC_PORT": self.otlp_grpc_port}

    def address(self, service: str) -> str:
        """host:port of a gRPC service, as reached on this machine."""
        return f"127.0.0.1:{self.grpc_ports[service]}"

    def pid_file(self, service: str) -> Path:
        """Where `up` records the process id of a running service."""
        return self.data_dir / "run" / f"{service}.pid"

    def log_file(self, service: str) -> Path:
        """Where a service of the local stack writes its structured logs."""
        return self.data_dir / "logs" / f"{service}.log"

    def restarts_file(self, service: str) -> Path:
        """Where `up` counts the restarts of a service (JSON: restarts, last_exit_code)."""
        return self.data_dir / "run" / f"{service}.restarts"


@dataclass
class Restarts:
    """What `up` knows about a service's crashes: how often it restarted it, and what is pending."""

    count: int = 0
    last_exit_code: int | None = None
    crashes_in_a_row: int = 0
    due_at: float | None = None  # monotonic time of the pending restart; None while the service runs

    def schedule(self, exit_code: int, ran_s: float) -> float:
        """Note a crash after `ran_s` seconds of running; returns the delay before the restart."""
        self.last_exit_code = exit_code
        self.crashes_in_a_row = 1 if ran_s >= STABLE_AFTER_S else self.crashes_in_a_row + 1
        delay: float = min(LONGEST_RESTART_DELAY_S, FIRST_RESTART_DELAY_S * 2 ** (self.crashes_in_a_row - 1))
        self.due_at = time.monotonic() + delay
        return delay


def read_restarts(layout: Layout, service: str) -> dict[str, int | None]:
    """The restart count `up` recorded for a service ({} when `up` is not running it)."""
    path = layout.restarts_file(service)
    return json.loads(path.read_text()) if path.exists() else {}


def read_layout() -> Layout:
    """The ports and data directory from the environment (or the embedded defaults)."""
    settings = load(CliSettings)
    return Layout(
        data_dir=settings.data_dir.resolve(),
        grpc_ports={name: settings.grpc_port(name) for name in GRPC_SERVICES},
        gateway_port=settings.gateway_port,
        otlp_grpc_port=settings.otlp_grpc_port,
    )


def claim(layout: Layout, embedded: bool) -> str:
    """Take the data directory for a new stack (until this process ends) and check its ports; returns the new
    stack's id.

    DataDirInUse when a stack (or, in the embedded profile, one of the services alone) already serves the
    directory; PortInUse naming the first port another process holds. Nothing is started either way.
    """
    stack_id = new_stack_id()
    lock = hold(layout.data_dir, STACK, stack_id)
    try:
        for name in ALL_SERVICES if embedded else ():
            check_unheld(layout.data_dir, name)
        for variable, port in layout.ports().items():
            check_free("127.0.0.1", port, variable)
    except BaseException:
        lock.release()
        raise
    return stack_id


def running_stack_id(layout: Layout) -> str:
    """The id of the stack `up` runs in this data directory ("" when none does)."""
    record = running_holder(layout.data_dir, STACK) or {}
    return str(record.get("stack_id", ""))


@dataclass
class Stack:
    """The six service processes of one local stack."""

    layout: Layout
    stack_id: str
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    started_at: dict[str, float] = field(default_factory=dict)
    restarts: dict[str, Restarts] = field(default_factory=dict)

    def environment(self) -> dict[str, str]:
        """The environment every child gets: this one, plus the data dir and every peer's address."""
        env = {
            **os.environ,
            "STASH_DATA_DIR": str(self.layout.data_dir),
            "STASH_STACK_ID": self.stack_id,
            **die_with_parent_env(signal.SIGTERM),
        }
        for name in GRPC_SERVICES:
            env[f"STASH_{name.upper()}_ADDRESS"] = self.layout.address(name)
        return env

    def start(self) -> None:
        """Start the gRPC services, then the gateway, each as its own process."""
        for name in ALL_SERVICES:
            self.launch(name)

    def launch(self, name: str) -> None:
        """Start one service (again), appending to its log, and record its pid and restart count."""
        log_path = self.layout.log_file(name)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as log:
            self.processes[name] = subprocess.Popen(
                [sys.executable, "-m", f"stash_{name}"],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.environment(),
                start_new_session=True,  # Ctrl-C reaches `up`, which stops the children in order.
            )
        self.started_at[name] = time.monotonic()
        pid_file = self.layout.pid_file(name)
        pid_file.parent.mkdir(parents=True, exist_ok=True)
        pid_file.write_text(str(self.processes[name].pid))
        self._save_restarts(name)

    def supervise(self) -> list[str]:
        """Notice services that exited and restart those whose backoff has passed; returns what happened."""
        events = []
        for name, code in self.exited().items():
            restarts = self.restarts.setdefault(name, Restarts())
            if restarts.due_at is None:
                delay = restarts.schedule(code, time.monotonic() - self.started_at[name])
                events.append(f"{name} exited with code {code}; restarting in {delay:.1f}s")
            elif time.monotonic() >= restarts.due_at:
                restarts.count += 1
                restarts.due_at = None
                self.launch(name)
                events.append(f"{name} restarted (restart {restarts.count}, pid {self.processes[name].pid})")
        return events

    def _save_restarts(self, name: str) -> None:
        restarts = self.restarts.get(name, Restarts())
        record = {"restarts": restarts.count, "last_exit_code": restarts.last_exit_code}
        self.layout.restarts_file(name).write_text(json.dumps(record))

    def wait_healthy(self, timeout_s: float = 60.0, stop_requested: threading.Event | None = None) -> None:
        """Block until every gRPC service reports itself ready as part of this stack, and the gateway's /readyz
        answers 200 for this stack; fails when `stop_requested` is set first."""
        deadline = time.monotonic() + timeout_s
        pending = set(ALL_SERVICES)
        # One HTTP client for every poll: a new one builds its TLS context each time (about 17 ms of CPU, taken
        # from the services starting beside it).
        with httpx.Client(timeout=5.0) as http:
            while pending:
                if stop_requested is not None and stop_requested.is_set():
                    raise StackError("interrupted while the services started")
                self.raise_if_exited()
                pending = {name for name in pending if not self.is_healthy(name, http)}
                if pending and time.monotonic() > deadline:
                    names = ", ".join(sorted(pending))
                    logs = self.layout.data_dir / "logs"
                    raise StackError(f"not healthy after {timeout_s:.0f}s: {names}; see {logs}")
                if pending:
                    time.sleep(0.1)

    def is_healthy(self, name: str, http: httpx.Client | None = None) -> bool:
        """Whether one service is ready as part of this stack (the gateway: /readyz 200 with this stack's id)."""
        if name == "gateway":
            code, body = gateway_health(self.layout, http)
            return code == 200 and body.get("stack_id") == self.stack_id
        return grpc_health(self.layout.address(name), name, self.stack_id) == "SERVING"

    def exited(self) -> dict[str, int]:
        """Services whose process has ended, with their exit codes."""
        return {name: code for name, process in self.processes.items() if (code := process.poll()) is not None}

    def raise_if_exited(self) -> None:
        """Fail with the log tail of the first service that died."""
        for name, code in self.exited().items():
            tail = self.layout.log_file(name).read_text(errors="replace").splitlines()[-15:]
            raise StackError(f"{name} exited with code {code}:\n" + "\n".join(tail))

    def stop(self, grace_s: float = 20.0) -> None:
        """SIGTERM the gateway first, then the services; SIGKILL what has not exited after `grace_s`."""
        for name in ["gateway", *GRPC_SERVICES]:
            process = self.processes.get(name)
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for name, process in self.processes.items():
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            self.layout.pid_file(name).unlink(missing_ok=True)
            self.layout.restarts_file(name).unlink(missing_ok=True)


def gateway_health(layout: Layout, http: httpx.Client | None = None) -> tuple[int | None, dict[str, object]]:
    """The gateway's /readyz status code and body (asked through `http` when given); (None, {}) when it does
    not answer."""
    url = f"{layout.gateway_url}/readyz"
    try:
        response = http.get(url) if http is not None else httpx.get(url, timeout=5.0)
    except httpx.TransportError:
        return None, {}
    return response.status_code, response.json()


def grpc_health(address: str, service: str, stack_id: str = "") -> str:
    """One gRPC service's readiness status name (UNREACHABLE when nothing answers, ANOTHER_STACK when it
    reports another `stack_id`)."""
    channel = open_channel(address)
    try:
        return check_health(channel, READINESS_NAMES[service], timeout_s=1.0, stack_id=stack_id)
    finally:
        channel.close()
