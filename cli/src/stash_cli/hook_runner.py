"""What an agent's recording hook runs: queue the session, start the upload in the background, return.

`python -m stash_cli.hook_runner claude-code` (the event JSON on stdin) or `… codex '<event JSON>'`.
Only the standard library is imported here, so the agent waits for nothing but the interpreter's start;
anything wrong is swallowed, because a hook must never break the agent (the next run retries).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

CLAUDE_CODE, CODEX = "claude_code", "codex"


def state_dir() -> Path:
    """The hooks' own state under the home directory the environment names now (HOME)."""
    return Path(os.environ.get("HOME") or Path.home()) / ".stash-rm" / "hooks"


def run_hook(state: Path, agent: str, arguments: list[str], stdin: str) -> None:
    """Queue the session the agent's event names and start the upload in the background."""
    if agent == "codex":
        queued = enqueue_codex(state, json.loads(arguments[-1]) if arguments else {})
    else:
        queued = enqueue_claude_code(state, json.loads(stdin or "{}"))
    if queued:
        start_flush()


def enqueue_claude_code(state: Path, event: dict[str, Any]) -> bool:
    """Queue the transcript a Claude Code Stop event names."""
    path = event.get("transcript_path")
    return isinstance(path, str) and bool(path) and _queue(state, {"agent": CLAUDE_CODE, "path": path})


def enqueue_codex(state: Path, event: dict[str, Any]) -> bool:
    """Queue the session a Codex notification names (its newest page is found when it uploads)."""
    session_id = event.get("thread-id") or event.get("thread_id")
    return (
        isinstance(session_id, str) and bool(session_id) and _queue(state, {"agent": CODEX, "session_id": session_id})
    )


def _queue(state: Path, entry: dict[str, str]) -> bool:
    """One pending file per session: later turns of the same session replace it (the newest snapshot wins)."""
    name = hashlib.sha256(json.dumps(entry, sort_keys=True).encode()).hexdigest()[:32]
    pending = state / "pending"
    pending.mkdir(parents=True, exist_ok=True)
    scratch = pending / f".{name}.tmp"
    scratch.write_text(json.dumps(entry))
    scratch.replace(pending / f"{name}.json")
    return True


def start_flush() -> None:
    """`stash-rm hooks flush` in its own session, detached, so the hook returns at once."""
    subprocess.Popen(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-m", "stash_cli", "hooks", "flush"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def main() -> None:
    try:
        agent, arguments = sys.argv[1], sys.argv[2:]
        run_hook(state_dir(), agent, arguments, "" if agent == "codex" else sys.stdin.read())
    except Exception:  # noqa: BLE001 - a hook must never break the agent
        return


if __name__ == "__main__":
    main()
