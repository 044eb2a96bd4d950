"""Finding the agent session transcripts on this machine (Claude Code and Codex) and uploading them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from stash_cli.client import ApiError, GatewayClient
from stash_cli.codex_pages import (
    PageError,
    Rollout,
    index_rollouts,
    newest_per_session,
    read_rollout,
    resolve_page,
    starts_a_rollout,
)

CLAUDE_CODE_DIR = Path.home() / ".claude" / "projects"
CODEX_DIR = Path.home() / ".codex" / "sessions"
CLAUDE_CODE, CODEX = "claude_code", "codex"
REFUSED = "refused"
FAILED = "failed"


@dataclass(frozen=True)
class SessionFile:
    """One transcript file and the format it is in."""

    path: Path
    format: str


@dataclass
class UploadSummary:
    """How many sessions were created, appended to, unchanged, refused (divergent) or failed."""

    counts: Counter[str] = field(default_factory=Counter)
    problems: list[tuple[Path, str]] = field(default_factory=list)

    def line(self) -> str:
        kinds = ("created", "appended", "unchanged", REFUSED, FAILED)
        return ", ".join(f"{self.counts[kind]} {kind}" for kind in kinds)


def find_sessions(claude_dir: Path, codex_dir: Path) -> list[SessionFile]:
    """Every Claude Code and Codex transcript, oldest modification first so the newest snapshot uploads last."""
    found = [SessionFile(path, "claude_code") for path in claude_dir.glob("**/*.jsonl")]
    found += [SessionFile(path, "codex") for path in codex_dir.glob("**/rollout-*.jsonl")]
    return sorted(found, key=lambda session: (session.path.stat().st_mtime, str(session.path)))


def codex_index(codex_dir: Path, beside: Path | None = None) -> dict[str, list[Path]]:
    """Rollout id → files: the sessions directory, its sibling `archived_sessions` (bases may live there) and
    the rollouts in the folder of `beside`."""
    roots = [root for root in (codex_dir, codex_dir.parent / "archived_sessions") if root.is_dir()]
    paths = {path for root in roots for path in root.glob("**/rollout-*.jsonl")}
    if beside is not None:
        paths |= set(beside.parent.glob("rollout-*.jsonl"))
    return index_rollouts(sorted(paths))


def session_file(path: Path, agent: str) -> SessionFile:
    """One file to upload: `auto` is codex for a Codex rollout (its page is rebuilt), else the server detects."""
    return SessionFile(path, CODEX if agent == "auto" and starts_a_rollout(path) else agent)


def newest_sessions(claude_dir: Path, codex_dir: Path) -> list[SessionFile]:
    """Every session once: each Claude Code file, and the newest Codex page of each session."""
    found = find_sessions(claude_dir, codex_dir)
    rollouts = []
    for session in found:
        if session.format == CODEX:
            try:
                rollouts.append(read_rollout(session.path))
            except PageError:
                rollouts.append(Rollout(session.path, None, None, None))  # uploaded to report its own error
    newest = {rollout.path for rollout in newest_per_session(rollouts)}
    return [session for session in found if session.format != CODEX or session.path in newest]


def transcript_bytes(session: SessionFile, codex_index: dict[str, list[Path]]) -> bytes:
    """What to upload for a session: a Codex page is rebuilt from its bases first."""
    return resolve_page(session.path, codex_index) if session.format == CODEX else session.path.read_bytes()


def upload_sessions(
    client: GatewayClient,
    sessions: Sequence[SessionFile],
    codex_index: dict[str, list[Path]],
    advance: Callable[[], None] = lambda: None,
) -> UploadSummary:
    """Upload each session through /api/v1/me/transcripts and count what became of it."""
    summary = UploadSummary()
    for session in sessions:
        result, problem = _upload_one(client, session, codex_index)
        summary.counts[result] += 1
        if problem:
            summary.problems.append((session.path, problem))
        advance()
    return summary


def _upload_one(
    client: GatewayClient, session: SessionFile, codex_index: dict[str, list[Path]]
) -> tuple[str, str | None]:
    try:
        answer = client.upload_transcript(transcript_bytes(session, codex_index), session.format)
    except PageError as error:
        return FAILED, str(error)
    except ApiError as error:
        return (REFUSED if error.status_code == 409 else FAILED), str(error)
    except OSError as error:
        return FAILED, str(error)
    return str(answer["result"]), None
