"""What one tool call does, from its tool name and input: a verb, the files it targets, a signature.

Tool names are matched case-insensitively:

| tools | verb |
|---|---|
| Edit, Write, MultiEdit, NotebookEdit, apply_patch | edit |
| Read, NotebookRead, WebFetch, view_image | read |
| Grep, Glob, LS, WebSearch, web_search | search |
| Bash, shell, exec_command, local_shell, shell_command | from the command (`commands.py`) |
| anything else (Task, TodoWrite, update_plan, MCP tools, …) | run |

Target files come from the input keys `file_path`, `path`, `paths` and `notebook_path`, from the
headers of an apply_patch body (a string under `input` or `patch`, or any string of the input),
and from shell commands as `commands.py` describes. The signature is a digest of the tool name and
input without the keys that only tune how a call runs (description, timeouts, output limits): two
calls with the same signature did the same thing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from typing import Any

from stash_labeler.prm.commands import Verb, classify_command, command_text, patch_files

_TOOL_VERBS: dict[str, Verb] = {
    **dict.fromkeys(("edit", "write", "multiedit", "notebookedit", "apply_patch"), "edit"),
    **dict.fromkeys(("read", "notebookread", "webfetch", "view_image"), "read"),
    **dict.fromkeys(("grep", "glob", "ls", "websearch", "web_search"), "search"),
}
SHELL_TOOLS = frozenset({"bash", "shell", "exec_command", "local_shell", "shell_command"})
_PATH_KEYS = ("file_path", "path", "notebook_path")
_TUNING_KEYS = frozenset({"description", "timeout", "timeout_ms", "yield_time_ms", "max_output_tokens"})


def describe_call(tool_name: str, tool_input: Mapping[str, Any] | None) -> tuple[Verb, tuple[str, ...]]:
    """The verb of a tool call and the files it targets, in the order the input names them."""
    arguments = tool_input or {}
    name = tool_name.lower()
    if name in SHELL_TOOLS:
        command = command_text(arguments.get("command", arguments.get("cmd")))
        return classify_command(command) if command is not None else ("run", ())
    if name == "apply_patch":
        return "edit", tuple(dict.fromkeys(file for text in _strings(arguments) for file in patch_files(text)))
    return _TOOL_VERBS.get(name, "run"), _input_paths(arguments)


def call_signature(tool_name: str, tool_input: Mapping[str, Any] | None) -> str:
    """A short digest of what the call asked for; equal for calls that differ only in tuning."""
    asked = {key: value for key, value in (tool_input or {}).items() if key not in _TUNING_KEYS}
    text = json.dumps([tool_name, asked], sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def _input_paths(arguments: Mapping[str, Any]) -> tuple[str, ...]:
    found = [arguments.get(key) for key in _PATH_KEYS]
    paths = arguments.get("paths")
    if isinstance(paths, list):
        found.extend(paths)
    return tuple(dict.fromkeys(path for path in found if isinstance(path, str) and path.strip()))


def _strings(value: Any) -> Iterator[str]:
    """Every string in a tool input, where an apply_patch body may sit (`input`, `patch`, raw arguments)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
