"""`stash-rm hooks install|uninstall|run` on a temporary home directory with the agents' existing settings."""

from __future__ import annotations

import io
import json
import shlex
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from stash_cli import hook_runner, hooks
from stash_cli.main import app

CLAUDE_SETTINGS = b"""{
    "model": "opus",
    "permissions": {"allow": ["Bash(ls:*)"], "deny": []},
    "hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": "say done"}]}],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./check.sh"}]}]
    },
    "note": "caf\\u00e9 \xe2\x80\xa8"
}
"""
CODEX_CONFIG = b"""# my Codex settings
model = "gpt-5-codex"   # the default model
approval_policy = "on-request"

[mcp_servers.docs]
command = "npx"
args = ["-y", "docs-server"]
"""


def _run(home: Path, *args: str, stdin: str | None = None) -> Any:
    return CliRunner().invoke(
        app, list(args), input=stdin, env={"HOME": str(home), "STASH_API_KEY": "srm_test", "STASH_URL": "http://gw"}
    )


def _claude(home: Path) -> Path:
    path = home / ".claude" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(CLAUDE_SETTINGS)
    return path


def _codex(home: Path) -> Path:
    path = home / ".codex" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(CODEX_CONFIG)
    return path


def _stop_commands(path: Path) -> list[str]:
    groups = json.loads(path.read_bytes())["hooks"]["Stop"]
    return [hook["command"] for group in groups for hook in group["hooks"]]


def test_claude_code_round_trip_leaves_the_settings_byte_identical(tmp_path: Path) -> None:
    settings = _claude(tmp_path)

    installed = _run(tmp_path, "hooks", "install", "claude-code")
    during = json.loads(settings.read_bytes())
    removed = _run(tmp_path, "hooks", "uninstall", "claude-code")

    assert installed.exit_code == 0, installed.output
    assert during["hooks"]["Stop"][0] == {"hooks": [{"type": "command", "command": "say done"}]}
    assert during["hooks"]["Stop"][1]["hooks"][0]["command"].endswith("-m stash_cli.hook_runner claude-code")
    assert {key: value for key, value in during.items() if key != "hooks"} == {
        key: value for key, value in json.loads(CLAUDE_SETTINGS).items() if key != "hooks"
    }
    assert removed.exit_code == 0, removed.output
    assert settings.read_bytes() == CLAUDE_SETTINGS


def test_claude_code_uninstall_after_other_edits_removes_only_the_hook(tmp_path: Path) -> None:
    settings = _claude(tmp_path)
    _run(tmp_path, "hooks", "install", "claude-code")
    edited = json.loads(settings.read_bytes())
    edited["model"] = "sonnet"
    edited["hooks"]["Stop"].append({"hooks": [{"type": "command", "command": "notify-send bye"}]})
    settings.write_text(json.dumps(edited, indent=2))

    removed = _run(tmp_path, "hooks", "uninstall", "claude-code")

    after = json.loads(settings.read_bytes())
    assert removed.exit_code == 0, removed.output
    assert _stop_commands(settings) == ["say done", "notify-send bye"]
    assert after == {**json.loads(CLAUDE_SETTINGS), "model": "sonnet", "hooks": after["hooks"]}
    assert after["hooks"]["PreToolUse"] == json.loads(CLAUDE_SETTINGS)["hooks"]["PreToolUse"]


def test_claude_code_without_settings_gets_a_file_and_loses_it_again(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"

    _run(tmp_path, "hooks", "install", "claude-code")
    commands = _stop_commands(settings)
    _run(tmp_path, "hooks", "uninstall", "claude-code")

    assert len(commands) == 1
    assert not settings.exists()


def test_codex_round_trip_leaves_the_config_byte_identical(tmp_path: Path) -> None:
    config = _codex(tmp_path)

    installed = _run(tmp_path, "hooks", "install", "codex")
    during = tomllib.loads(config.read_text())
    removed = _run(tmp_path, "hooks", "uninstall", "codex")

    assert installed.exit_code == 0, installed.output
    assert during["notify"] == hooks.hook_command("codex")
    assert {key: value for key, value in during.items() if key != "notify"} == tomllib.loads(CODEX_CONFIG.decode())
    assert removed.exit_code == 0, removed.output
    assert config.read_bytes() == CODEX_CONFIG


def test_codex_uninstall_after_other_edits_removes_only_its_line(tmp_path: Path) -> None:
    config = _codex(tmp_path)
    _run(tmp_path, "hooks", "install", "codex")
    config.write_bytes(config.read_bytes() + b'\n[profiles.fast]\nmodel = "o4-mini"\n')

    _run(tmp_path, "hooks", "uninstall", "codex")

    assert config.read_bytes() == CODEX_CONFIG + b'\n[profiles.fast]\nmodel = "o4-mini"\n'


def test_codex_with_its_own_notify_is_refused_and_left_alone(tmp_path: Path) -> None:
    config = tmp_path / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_bytes(b'notify = ["my-notifier"]\n' + CODEX_CONFIG)

    refused = _run(tmp_path, "hooks", "install", "codex")

    assert refused.exit_code == 1
    assert "already runs notify" in refused.output
    assert config.read_bytes() == b'notify = ["my-notifier"]\n' + CODEX_CONFIG
    assert not (tmp_path / ".stash-rm" / "hooks" / "codex.json").exists()


def test_a_second_install_and_an_uninstall_without_install_are_refused(tmp_path: Path) -> None:
    settings = _claude(tmp_path)
    _run(tmp_path, "hooks", "install", "claude-code")
    installed_once = settings.read_bytes()

    again = _run(tmp_path, "hooks", "install", "claude-code")
    nothing = _run(tmp_path, "hooks", "uninstall", "codex")

    assert again.exit_code == 1 and "already installed" in again.output
    assert settings.read_bytes() == installed_once
    assert nothing.exit_code == 1 and "no codex hook" in nothing.output


def test_the_credentials_are_private(tmp_path: Path) -> None:
    _run(tmp_path, "hooks", "install", "claude-code")

    credentials = tmp_path / ".stash-rm" / "hooks" / "credentials.json"

    assert json.loads(credentials.read_bytes()) == {"url": "http://gw", "api_key": "srm_test"}
    assert credentials.stat().st_mode & 0o077 == 0


def _state(home: Path) -> Path:
    return home / ".stash-rm" / "hooks"


def test_the_installed_commands_run_the_light_runner(tmp_path: Path) -> None:
    settings, config = _claude(tmp_path), _codex(tmp_path)
    _run(tmp_path, "hooks", "install", "claude-code")
    _run(tmp_path, "hooks", "install", "codex")

    assert _stop_commands(settings)[-1] == shlex.join([sys.executable, "-m", "stash_cli.hook_runner", "claude-code"])
    assert tomllib.loads(config.read_text())["notify"] == [sys.executable, "-m", "stash_cli.hook_runner", "codex"]


@pytest.fixture
def flushes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The background uploads the hook would start, counted instead of started."""
    started: list[int] = []
    monkeypatch.setattr(hook_runner, "start_flush", lambda: started.append(1))
    return started


def test_the_claude_code_hook_queues_its_transcript_and_starts_the_upload(tmp_path: Path, flushes: list[int]) -> None:
    event = {"session_id": "s1", "transcript_path": "/work/s1.jsonl", "hook_event_name": "Stop"}

    hook_runner.run_hook(_state(tmp_path), "claude-code", [], json.dumps(event))
    hook_runner.run_hook(_state(tmp_path), "claude-code", [], json.dumps(event))

    pending = list((tmp_path / ".stash-rm" / "hooks" / "pending").glob("*.json"))
    assert [json.loads(path.read_bytes()) for path in pending] == [{"agent": "claude_code", "path": "/work/s1.jsonl"}]
    assert flushes == [1, 1]


def test_the_codex_hook_queues_its_session(tmp_path: Path, flushes: list[int]) -> None:
    event = {"type": "agent-turn-complete", "thread-id": "0199aaaa", "turn-id": "1"}

    hook_runner.run_hook(_state(tmp_path), "codex", ["--", json.dumps(event)], "")

    pending = list((tmp_path / ".stash-rm" / "hooks" / "pending").glob("*.json"))
    assert [json.loads(path.read_bytes()) for path in pending] == [{"agent": "codex", "session_id": "0199aaaa"}]


def test_a_hook_given_garbage_returns_without_failing_or_queueing(
    tmp_path: Path, flushes: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr("sys.argv", ["hook_runner", "claude-code"])
    monkeypatch.setattr("sys.stdin", io.StringIO("not json"))

    hook_runner.main()
    hook_runner.run_hook(_state(tmp_path), "claude-code", [], json.dumps({"session_id": "no transcript path"}))

    assert not (tmp_path / ".stash-rm" / "hooks" / "pending").exists()
    assert flushes == []
