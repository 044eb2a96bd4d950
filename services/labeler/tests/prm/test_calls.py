"""Tool calls: verbs and target files for Claude Code and Codex tools, and call signatures."""

from __future__ import annotations

from typing import Any

import pytest

from stash_labeler.prm.calls import call_signature, describe_call


@pytest.mark.parametrize(
    ("tool", "arguments", "verb", "files"),
    [
        ("Edit", {"file_path": "/repo/a.py", "old_string": "x", "new_string": "y"}, "edit", ("/repo/a.py",)),
        ("Write", {"file_path": "/repo/b.md", "content": "# B"}, "edit", ("/repo/b.md",)),
        ("MultiEdit", {"file_path": "/repo/a.py", "edits": []}, "edit", ("/repo/a.py",)),
        ("NotebookEdit", {"notebook_path": "/repo/n.ipynb", "new_source": ""}, "edit", ("/repo/n.ipynb",)),
        ("Read", {"file_path": "/repo/a.py", "offset": 10, "limit": 5}, "read", ("/repo/a.py",)),
        ("Grep", {"pattern": "TODO", "path": "src"}, "search", ("src",)),
        ("Glob", {"pattern": "**/*.ex"}, "search", ()),
        ("WebSearch", {"query": "elixir credo"}, "search", ()),
        ("web_search", {"type": "search", "query": "x"}, "search", ()),
        ("WebFetch", {"url": "https://example.com", "prompt": "?"}, "read", ()),
        ("Bash", {"command": "pytest tests/test_a.py", "description": "run tests"}, "test", ("tests/test_a.py",)),
        ("Bash", {"command": "mix phx.server"}, "run", ()),
        ("exec_command", {"cmd": "sed -n '1,80p' src/x.ts", "workdir": "/repo"}, "read", ("src/x.ts",)),
        ("shell", {"command": ["bash", "-lc", "rg -n foo src"]}, "search", ()),
        ("local_shell", {"type": "exec", "command": ["cat", "README.md"]}, "read", ("README.md",)),
        ("exec_command", {"input": "[REDACTED_ARGUMENTS len=163 sha=e58b438a]"}, "run", ()),
        (
            "apply_patch",
            {"input": "*** Begin Patch\n*** Update File: src/a.ts\n@@\n*** End Patch"},
            "edit",
            ("src/a.ts",),
        ),
        ("apply_patch", {"patch": "*** Begin Patch\n*** Add File: b.ts\n*** End Patch"}, "edit", ("b.ts",)),
        ("apply_patch", {"input": "[REDACTED_INPUT len=1913]"}, "edit", ()),
        ("Task", {"description": "explore", "prompt": "look at src/a.py"}, "run", ()),
        ("update_plan", {"plan": []}, "run", ()),
        ("mcp__github__create_issue", {"path": "x/y"}, "run", ("x/y",)),
        ("Read", {"paths": ["a.py", "b.py", "a.py", 3]}, "read", ("a.py", "b.py")),
        ("Read", None, "read", ()),
    ],
)
def test_describe_call(tool: str, arguments: dict[str, Any] | None, verb: str, files: tuple[str, ...]) -> None:
    assert describe_call(tool, arguments) == (verb, files)


def test_signature_ignores_descriptions_timeouts_and_output_limits() -> None:
    first = call_signature("exec_command", {"cmd": "pytest", "yield_time_ms": 1000, "max_output_tokens": 8000})
    second = call_signature("exec_command", {"cmd": "pytest", "yield_time_ms": 5000})
    assert first == second
    assert call_signature("Bash", {"command": "ls", "description": "a"}) == call_signature("Bash", {"command": "ls"})


def test_signature_differs_for_different_inputs_or_tools() -> None:
    base = call_signature("Glob", {"pattern": "**/*.ex"})
    assert base != call_signature("Glob", {"pattern": "**/*.exs"})
    assert base != call_signature("Grep", {"pattern": "**/*.ex"})
    assert call_signature("Read", None) == call_signature("Read", {})
