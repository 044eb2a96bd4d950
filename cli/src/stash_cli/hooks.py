"""Recording hooks: Claude Code and Codex upload their session transcript whenever a turn ends.

`install` adds one hook to the agent's own settings and records what it changed; `uninstall` takes out
exactly that, so the rest of the file is left as it was (byte for byte when nothing else changed since).

- Claude Code: a `Stop` command hook in `~/.claude/settings.json`; Claude Code sends the hook a JSON
  object on stdin with `session_id` and `transcript_path`.
- Codex: `notify` in `~/.codex/config.toml`; Codex runs it with one JSON argument whose `thread-id` names
  the session (its newest rollout page is uploaded, rebuilt from its bases).

The hook itself (`stash_cli.hook_runner`) only writes a pending entry and starts `hooks flush` in the
background, so the agent never waits for the network. `flush` uploads every pending entry through
/api/v1/me/transcripts and keeps the ones that failed, so a failed upload is retried on the next run.
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import sys
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stash_cli.client import ApiError, GatewayClient
from stash_cli.codex_pages import PageError, newest_per_session, read_rollout
from stash_cli.sessions import CLAUDE_CODE, CODEX, SessionFile, codex_index, transcript_bytes

AGENTS = ("claude-code", "codex")


class HookError(Exception):
    """A hook that cannot be installed or removed as asked; the agent's settings are left untouched."""


@dataclass(frozen=True)
class Home:
    """Where the agents' settings and the hooks' own state live, under one home directory."""

    root: Path

    @property
    def claude_settings(self) -> Path:
        return self.root / ".claude" / "settings.json"

    @property
    def codex_config(self) -> Path:
        return self.root / ".codex" / "config.toml"

    @property
    def codex_sessions(self) -> Path:
        return self.root / ".codex" / "sessions"

    @property
    def state(self) -> Path:
        return self.root / ".stash-rm" / "hooks"

    @property
    def pending(self) -> Path:
        return self.state / "pending"  # where hook_runner queues sessions


def current_home() -> Home:
    """The home directory as the environment names it now (HOME), so tests and agents agree."""
    return Home(Path(os.environ.get("HOME") or Path.home()))


def hook_command(agent: str) -> list[str]:
    """The command the agent runs: this interpreter (whatever the agent's PATH is) and the light runner."""
    return [sys.executable, "-m", "stash_cli.hook_runner", agent]


# Installing and removing


def install(home: Home, agent: str, url: str, api_key: str) -> Path:
    """Add the hook to the agent's settings and save where uploads go; returns the file changed."""
    record_path = home.state / f"{agent}.json"
    if record_path.exists():
        raise HookError(f"the {agent} hook is already installed; `stash-rm hooks uninstall {agent}` first")
    target = home.claude_settings if agent == "claude-code" else home.codex_config
    before = target.read_bytes() if target.exists() else None
    after, created = _with_claude_hook(before) if agent == "claude-code" else (_with_codex_notify(before), [])
    _write_private(home.state / "credentials.json", json.dumps({"url": url, "api_key": api_key}).encode())
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(after)
    record = {"file": str(target), "before": _text(before), "after": after.decode(), "created": created}
    _write_private(record_path, json.dumps(record).encode())
    return target


def uninstall(home: Home, agent: str) -> Path:
    """Remove what `install` added; the file as it was before when nothing else changed since."""
    record_path = home.state / f"{agent}.json"
    if not record_path.exists():
        raise HookError(f"no {agent} hook of stash-rm is installed")
    record = json.loads(record_path.read_bytes())
    target = Path(record["file"])
    current = target.read_bytes() if target.exists() else b""
    if current == record["after"].encode():
        _restore(target, record["before"])
    elif agent == "claude-code":
        target.write_bytes(_without_claude_hook(current, record["created"]))
    else:
        target.write_bytes(_without_codex_notify(current))
    record_path.unlink()
    return target


def _restore(target: Path, before: str | None) -> None:
    if before is None:
        target.unlink()
    else:
        target.write_bytes(before.encode())


def _text(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode()


def _write_private(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(data)


def _claude_settings(raw: bytes | None) -> dict[str, Any]:
    if raw is None or not raw.strip():
        return {}
    try:
        settings = json.loads(raw)
    except json.JSONDecodeError as error:
        raise HookError(f"Claude Code's settings are not valid JSON ({error}); fix them first") from None
    if not isinstance(settings, dict):
        raise HookError("Claude Code's settings are not a JSON object; fix them first")
    return settings


def _claude_json(settings: dict[str, Any]) -> bytes:
    return (json.dumps(settings, indent=2, ensure_ascii=False) + "\n").encode()


def _with_claude_hook(raw: bytes | None) -> tuple[bytes, list[str]]:
    """The settings with our Stop hook added, and the containers that had to be created for it."""
    settings = _claude_settings(raw)
    created = [name for name in ("hooks",) if name not in settings]
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict) or not isinstance(hooks.get("Stop", []), list):
        raise HookError("Claude Code's `hooks` setting is not in the documented shape; fix it first")
    created += [] if "Stop" in hooks else ["Stop"]
    command = shlex.join(hook_command("claude-code"))
    hooks.setdefault("Stop", []).append({"hooks": [{"type": "command", "command": command}]})
    return _claude_json(settings), created


def _without_claude_hook(raw: bytes, created: list[str]) -> bytes:
    settings = _claude_settings(raw)
    hooks = settings.get("hooks", {})
    stop = [group for group in hooks.get("Stop", []) if not _is_ours(group)]
    if stop or "Stop" not in created:
        hooks["Stop"] = stop
    else:
        hooks.pop("Stop", None)
    if not hooks and "hooks" in created:
        settings.pop("hooks", None)
    return _claude_json(settings)


def _is_ours(group: Any) -> bool:
    """Our matcher group, whichever interpreter path it was installed with."""
    hooks = group.get("hooks", []) if isinstance(group, dict) else []
    ours = shlex.join(hook_command("claude-code")[1:])
    return any(isinstance(hook, dict) and str(hook.get("command", "")).endswith(ours) for hook in hooks)


_CODEX_LINE_END = "  # added by `stash-rm hooks install codex`; `stash-rm hooks uninstall codex` removes it\n"


def _with_codex_notify(raw: bytes | None) -> bytes:
    """The config with `notify` as its first line: a top-level key must come before any table."""
    text = (raw or b"").decode()
    try:
        config = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise HookError(f"Codex's config.toml is not valid TOML ({error}); fix it first") from None
    if "notify" in config:
        raise HookError(f"Codex already runs notify = {config['notify']!r}; remove it first (Codex runs only one)")
    line = f"notify = {json.dumps(hook_command('codex'))}{_CODEX_LINE_END}"
    return (line + text).encode()


def _without_codex_notify(raw: bytes) -> bytes:
    lines = raw.decode().splitlines(keepends=True)
    return "".join(line for line in lines if not line.endswith(_CODEX_LINE_END)).encode()


# Uploading what the hooks queued (hook_runner queues it)


def flush(home: Home) -> tuple[int, int]:
    """Upload every pending entry, one flusher at a time; returns (uploaded, kept for the next run)."""
    with _flush_lock(home) as locked:
        if not locked:
            return 0, len(list(home.pending.glob("*.json")))
        if not (home.state / "credentials.json").exists():
            raise HookError("no hook is installed: run `stash-rm hooks install claude-code` (or codex) first")
        credentials = json.loads((home.state / "credentials.json").read_bytes())
        client = GatewayClient(credentials["url"], credentials["api_key"], timeout_s=120.0)
        try:
            return _upload_pending(home, client)
        finally:
            client.close()


def _upload_pending(home: Home, client: GatewayClient) -> tuple[int, int]:
    """Each entry once per run, and again when a turn queued a newer one meanwhile; failures wait for the next."""
    uploaded, tried = 0, set()
    while pending := [entry for entry in _pending_entries(home) if entry not in tried]:
        for path, stamp in pending:
            tried.add((path, stamp))
            if _upload_entry(home, client, json.loads(path.read_bytes())) and path.stat().st_mtime_ns == stamp:
                path.unlink()
                uploaded += 1
    return uploaded, len(_pending_entries(home))


def _pending_entries(home: Home) -> list[tuple[Path, int]]:
    return [(path, path.stat().st_mtime_ns) for path in sorted(home.pending.glob("*.json"))]


def _upload_entry(home: Home, client: GatewayClient, entry: dict[str, str]) -> bool:
    """True once the entry needs no retry: stored, unchanged, or refused for good (divergent, 4xx)."""
    try:
        session = _session_of(home, entry)
        if session is None:
            return False
        client.upload_transcript(transcript_bytes(session, codex_index(home.codex_sessions)), session.format)
    except ApiError as error:
        return error.status_code is not None and 400 <= error.status_code < 500 and error.status_code not in _RETRIED
    except (PageError, OSError):
        return False
    return True


_RETRIED = (401, 408, 429)  # a key that may be fixed, a timeout, a rate limit


def _session_of(home: Home, entry: dict[str, str]) -> SessionFile | None:
    if entry["agent"] == CLAUDE_CODE:
        return SessionFile(Path(entry["path"]), CLAUDE_CODE)
    rollouts = [read_rollout(path) for path in home.codex_sessions.glob("**/rollout-*.jsonl")]
    mine = newest_per_session(rollout for rollout in rollouts if rollout.session_id == entry["session_id"])
    return SessionFile(mine[0].path, CODEX) if mine else None


@contextmanager
def _flush_lock(home: Home) -> Iterator[bool]:
    home.state.mkdir(parents=True, exist_ok=True)
    with (home.state / "flush.lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
