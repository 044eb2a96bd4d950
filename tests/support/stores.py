"""Private PostgreSQL and Redis servers that a test or a bench may stop and start again.

The machine's own servers are shared by every test run on it and must never be stopped; an outage is
played on a server of our own instead: `initdb` + `pg_ctl` in a temporary directory (as the `postgres`
user when we are root, which initdb refuses to be), and `redis-server` without persistence, each on a
free port that stays the same across restarts, so the services reconnect to the same address.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import psycopg
import redis

from support.processes import free_port

_POSTGRES_BIN = next(Path("/usr/lib/postgresql").glob("*/bin"), Path("/usr/bin"))


class PrivatePostgres:
    """A PostgreSQL server of our own in a temporary directory; `url` names its database `stash`."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/stash"

    def _run(self, *command: str) -> None:
        as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        subprocess.run([*as_postgres, *command], check=True, capture_output=True, timeout=120)

    def initialise(self) -> None:
        """Create the cluster, start it and create the database."""
        if os.geteuid() == 0:
            shutil.chown(self.directory, "postgres")
        self._run(str(_POSTGRES_BIN / "initdb"), "-D", str(self.directory / "data"), "-U", "postgres")
        self.start()
        with psycopg.connect(self.url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as admin:
            admin.execute("CREATE DATABASE stash")

    def start(self) -> None:
        """Start the server (again) on its port and wait until it accepts connections."""
        options = f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c fsync=off"
        data, log = str(self.directory / "data"), str(self.directory / "log")
        self._run(str(_POSTGRES_BIN / "pg_ctl"), "-D", data, "-o", options, "-l", log, "-w", "start")

    def stop(self) -> None:
        """Stop the server at once, as a crash would (open connections are cut)."""
        self._run(str(_POSTGRES_BIN / "pg_ctl"), "-D", str(self.directory / "data"), "-m", "immediate", "stop")


@contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    """A running private PostgreSQL with an empty database `stash`; stopped and removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="stash-pg-") as directory:
        server = PrivatePostgres(Path(directory))
        server.initialise()
        try:
            yield server
        finally:
            with suppress(subprocess.CalledProcessError):  # already stopped by the test
                server.stop()


class PrivateRedis:
    """A redis-server of our own without persistence; `url` is its database 0."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the server (again) on its port and wait until it answers PING."""
        command = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + 30
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        client.close()

    def stop(self) -> None:
        """Kill the server (what it held is lost, as wake-ups may be)."""
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=30)
            self.process = None


@contextmanager
def private_redis() -> Iterator[PrivateRedis]:
    """A running private Redis; stopped afterwards."""
    server = PrivateRedis()
    server.start()
    try:
        yield server
    finally:
        server.stop()
