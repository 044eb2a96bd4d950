"""What kind of work a tool call does: inspecting, editing, verifying, publishing or browsing a site.

A recognised change of work starts a subtask; a call whose kind is not recognised (None) continues
whatever runs. Shell commands are classified by their first words; web tools by their site.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urlparse

from stash_common.steps import TraceStep

INSPECTING, EDITING, VERIFYING, PUBLISHING, BROWSING = "inspecting", "editing", "verifying", "publishing", "browsing"

_TOOL_KINDS = {
    INSPECTING: {"read", "grep", "glob", "ls", "view", "read_file", "list_files", "search_files", "notebookread"},
    EDITING: {"edit", "write", "multiedit", "notebookedit", "apply_patch", "write_file", "edit_file", "create_file"},
}
_BROWSING_TOOLS = {"webfetch", "websearch", "web_search", "browser_navigate", "navigate", "open_url", "fetch"}
_COMMAND_KINDS = (
    (PUBLISHING, re.compile(r"\b(git (commit|push|tag)|gh (pr|release)|npm publish|twine upload|docker push)\b")),
    (VERIFYING, re.compile(r"\b(pytest|ruff|mypy|tox|nox|tsc|eslint|(cargo|go|npm|yarn|pnpm|mix) test)\b")),
    (VERIFYING, re.compile(r"\bmake (test|check|lint)\b")),
    (EDITING, re.compile(r"\b(apply_patch|sed -i|perl -pi)\b")),
    (INSPECTING, re.compile(r"^\s*(cat|sed -n|rg|grep|ls|find|head|tail|wc|tree|less|nl)\b")),
    (INSPECTING, re.compile(r"^\s*git (status|diff|log|show)\b")),
)
_COMMAND_KEYS = ("cmd", "command")
_PATH_KEYS = ("file_path", "path", "notebook_path", "pattern")


@dataclass(frozen=True)
class Work:
    """A recognised kind of work; `site` is the web host for browsing, `target` a file or host to name it by."""

    kind: str
    site: str | None = None
    target: str | None = None

    @property
    def title(self) -> str:
        """The fallback title of a subtask that starts with this work, e.g. `Editing plan.md`."""
        words = self.kind.capitalize()
        return f"{words} {self.target}" if self.target else words


def work_of(step: TraceStep) -> Work | None:
    """The work a tool call does; None for other steps and for calls of no recognised kind."""
    if not step.is_tool_call or step.tool_name is None:
        return None
    name, arguments = step.tool_name.lower(), step.tool_input or {}
    if name in _BROWSING_TOOLS or name.startswith(("browser_", "mcp__playwright")):
        site = _site(arguments)
        return Work(BROWSING, site=site, target=site)
    for kind, names in _TOOL_KINDS.items():
        if name in names:
            return Work(kind, target=_file(arguments))
    command = _command(arguments)
    if command is None:
        return None
    for kind, pattern in _COMMAND_KINDS:
        if pattern.search(command):
            return Work(kind)
    return None


def _command(arguments: dict[str, Any]) -> str | None:
    for key in _COMMAND_KEYS:
        value = arguments.get(key)
        if isinstance(value, list):
            value = " ".join(str(part) for part in value)
        if isinstance(value, str) and value.strip():
            return value
    return None


def _file(arguments: dict[str, Any]) -> str | None:
    for key in _PATH_KEYS:
        value = arguments.get(key)
        if isinstance(value, str) and value.strip():
            return PurePosixPath(value).name or value
    return None


def _site(arguments: dict[str, Any]) -> str:
    url = arguments.get("url")
    if isinstance(url, str) and url.strip():
        return urlparse(url).hostname or url
    return "web search"
