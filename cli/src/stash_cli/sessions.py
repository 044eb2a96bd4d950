"""Finding the agent session transcripts on this machine: Claude Code and Codex."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

CLAUDE_CODE_DIR = Path.home() / ".claude" / "projects"
CODEX_DIR = Path.home() / ".codex" / "sessions"


@dataclass(frozen=True)
class SessionFile:
    """One transcript file and the format it is in."""

    path: Path
    format: str


def find_sessions(claude_dir: Path, codex_dir: Path) -> list[SessionFile]:
    """Every Claude Code and Codex transcript, oldest modification first so the newest snapshot uploads last."""
    found = [SessionFile(path, "claude_code") for path in claude_dir.glob("**/*.jsonl")]
    found += [SessionFile(path, "codex") for path in codex_dir.glob("**/rollout-*.jsonl")]
    return sorted(found, key=lambda session: (session.path.stat().st_mtime, str(session.path)))
