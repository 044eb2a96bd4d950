"""Listening ports: one process per port, and a refusal that names what holds a taken one.

gRPC binds with SO_REUSEPORT unless told not to, so a second stack on the same ports used to start
without an error and take a share of the first one's connections. Every server of the platform binds
without it, and checks its port first, so a taken port stops the process with a message naming the
port, the variable that sets it, and the process listening there (read from /proc on Linux).
"""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path

from stash_common.errors import ConfigError

_LISTEN = "0A"  # the TCP state LISTEN in /proc/net/tcp


class PortInUse(ConfigError):
    """A server's port is already taken; the message names the port, its variable and what holds it."""


def bound_socket(host: str, port: int, variable: str) -> socket.socket:
    """A TCP socket bound to host:port (not listening yet); PortInUse when another socket holds the port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    # SO_REUSEADDR only lets a restarted server take a port whose old connections linger in TIME_WAIT;
    # unlike SO_REUSEPORT, it never lets two sockets listen on one port.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        if error.errno == errno.EADDRINUSE:
            raise port_in_use(host, port, variable) from None
        raise
    return sock


def check_free(host: str, port: int, variable: str) -> None:
    """PortInUse unless host:port can be bound right now (port 0 always can)."""
    if port:
        bound_socket(host, port, variable).close()


def port_in_use(host: str, port: int, variable: str) -> PortInUse:
    """The refusal for a taken port, naming the process that listens on it when this machine says."""
    holder = port_holder(port)
    held = f"by {holder}" if holder else "by another process"
    return PortInUse(f"port {port} on {host} is already in use {held}; stop it, or set {variable} to a free port")


def port_holder(port: int) -> str | None:
    """`pid N (command line)` of the process listening on TCP `port`, when /proc tells (Linux, same user)."""
    inodes = _listening_inodes(port)
    if not inodes:
        return None
    for process in Path("/proc").iterdir():
        if process.name.isdigit() and _holds_socket(process, inodes):
            return f"pid {process.name} ({_command_line(process)})"
    return None


def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == _LISTEN:
                inodes.add(fields[9])
    return inodes


def _holds_socket(process: Path, inodes: set[str]) -> bool:
    try:
        descriptors = list((process / "fd").iterdir())
    except OSError:  # gone meanwhile, or another user's
        return False
    for descriptor in descriptors:
        try:
            link = os.readlink(descriptor)
        except OSError:  # closed meanwhile
            continue
        if link.startswith("socket:[") and link[8:-1] in inodes:
            return True
    return False


def _command_line(process: Path) -> str:
    try:
        words = (process / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    return " ".join(word.decode(errors="replace") for word in words if word)[:200]
