"""What a shell command does: one verb (test, read, search, edit or run) and the files it names.

The command is split into pipelines at `&&`, `||`, `;`, `&` and new lines (quotes respected,
here-document bodies dropped); only the head of each pipeline counts, since `pytest | tail` runs
tests and `rg x | head` searches. Leading `VAR=value`, `sudo`, `env`, `time`, `timeout N`, `nice`
and runners such as `uv run`, `poetry run`, `npx` and `bundle exec` are looked through.

- test: any pipeline head runs a test suite (pytest, `python -m pytest|unittest`, tox, nox, jest,
  vitest, mocha, rspec, phpunit, ctest, `npm|yarn|pnpm|bun test`, `npm run test…`, `go test`,
  `cargo test|nextest`, `make test|check`, `mix test`, `dotnet test`, `deno test`, gradle/maven test).
- Otherwise the first head that is not `cd`, `export`, `source` or `set` decides: cat, head, tail,
  less, more, nl, wc, bat, strings, xxd, od, hexdump, `sed` without `-i` and `git
  diff|show|log|status|blame` read; rg, grep, ag, ack, find, fd, ls, tree, `git grep|ls-files`
  search; `sed -i` and `apply_patch` edit; anything else runs.
- Files are collected conservatively: only arguments of read, edit and test commands (not git's),
  only words that contain a slash or end in a file extension, never options, globs, URLs, `...`,
  variables or redirection targets (pytest's `::node` suffix is cut; a leading `./` is dropped). An
  `apply_patch` body (`*** Begin Patch`) makes the command an edit of the files its headers name.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterator, Sequence
from typing import Literal

Verb = Literal["edit", "read", "test", "run", "search"]

_SEPARATORS = frozenset({"&&", "||", ";", ";;", "&", "\n", "(", ")"})
_PIPES = frozenset({"|", "|&"})
_PRELUDES = frozenset({"cd", "pushd", "popd", "export", "source", ".", "set", "unset", "true"})
_SHELLS = frozenset({"bash", "sh", "zsh", "dash"})
_PREFIXES = frozenset({"sudo", "env", "time", "nice", "nohup", "command", "exec", "xvfb-run"})
_RUNNERS = {
    "uv": "run",
    "poetry": "run",
    "pipenv": "run",
    "pdm": "run",
    "hatch": "run",
    "rye": "run",
    "bundle": "exec",
    "pnpm": "exec",
    "npx": "",
    "bunx": "",
    "pnpx": "",
}
_TEST_PROGRAMS = frozenset(
    {"pytest", "py.test", "tox", "nox", "jest", "vitest", "mocha", "rspec", "phpunit", "ctest", "ava", "karma"}
)
_TEST_SUBCOMMANDS = {
    "go": {"test"},
    "cargo": {"test", "nextest"},
    "dotnet": {"test"},
    "mix": {"test"},
    "deno": {"test"},
    "swift": {"test"},
    "bazel": {"test"},
    "playwright": {"test"},
    "gradle": {"test", "check"},
    "gradlew": {"test", "check"},
    "mvn": {"test", "verify"},
    "mvnw": {"test", "verify"},
}
_PACKAGE_MANAGERS = frozenset({"npm", "yarn", "pnpm", "bun"})
_PYTHON_TEST_MODULES = frozenset({"pytest", "unittest", "tox", "nox"})
_READ_PROGRAMS = frozenset(
    {"cat", "head", "tail", "less", "more", "nl", "wc", "bat", "strings", "xxd", "od", "hexdump"}
)
_SEARCH_PROGRAMS = frozenset({"rg", "grep", "egrep", "fgrep", "ag", "ack", "find", "fd", "ls", "tree", "locate"})
_GIT_VERBS: dict[str, Verb] = {
    "diff": "read",
    "show": "read",
    "log": "read",
    "status": "read",
    "blame": "read",
    "grep": "search",
    "ls-files": "search",
}
_PATCH_PROGRAMS = frozenset({"apply_patch", "applypatch"})

_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_]\w*)\1([^\n]*)\n(?:.*?\n)?[ \t]*\2[ \t]*(?=\n|$)", re.DOTALL)
_PATCH_HEADER = re.compile(r"^\*\*\* (?:Update File|Add File|Delete File|Move to): (.+?)\s*$", re.MULTILINE)
_ASSIGNMENT = re.compile(r"^[A-Za-z_]\w*=")
_PYTHON = re.compile(r"^python(?:\d+(?:\.\d+)?)?$")
_EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,7}$")
# A word may hold escaped or quoted spaces, but never new lines, globs, variables or shell syntax.
_NOT_A_PATH = re.compile(r"[\n\r\t*?\[\]{}$<>|;&()='\"`\\]|://|\.\.\.")


def classify_command(command: str) -> tuple[Verb, tuple[str, ...]]:
    """The verb of a shell command and the files it reads, edits or tests."""
    if "*** Begin Patch" in command:
        return "edit", patch_files(command)
    heads = [_unwrap(head) for head in _pipeline_heads(_HEREDOC.sub(r"<<\1\2\1\3", command))]
    heads = [head for head in heads if head and os.path.basename(head[0]) not in _PRELUDES]
    verbs = [_head_verb(head) for head in heads]
    files = tuple(dict.fromkeys(file for head, verb in zip(heads, verbs, strict=True) for file in _files(head, verb)))
    if "test" in verbs:
        return "test", files
    return (verbs[0] if verbs else "run"), files


def command_text(value: object) -> str | None:
    """A tool input's command as one script: `["bash", "-lc", script]` → script; other lists are joined."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list) or not value or not all(isinstance(part, str) for part in value):
        return None
    if len(value) >= 3 and os.path.basename(value[0]) in _SHELLS and value[1] in ("-c", "-lc", "-ic", "-lic"):
        return value[2]
    if os.path.basename(value[0]) in _PATCH_PROGRAMS:
        return "\n".join(value)  # apply_patch's body is an argument, not a shell word
    return shlex.join(value)


def patch_files(patch: str) -> tuple[str, ...]:
    """The files an apply_patch body adds, updates, deletes or moves to, in order."""
    return tuple(dict.fromkeys(_clean_path(path) for path in _PATCH_HEADER.findall(patch)))


def _pipeline_heads(script: str) -> Iterator[list[str]]:
    """The first command of each pipeline, as words."""
    current: list[str] = []
    in_pipe_tail = False
    for token in _tokens(script):
        if token in _SEPARATORS or token in _PIPES:
            if current and not in_pipe_tail:
                yield current
            current, in_pipe_tail = [], token in _PIPES
        elif not in_pipe_tail:
            current.append(token)
    if current and not in_pipe_tail:
        yield current


def _tokens(script: str) -> list[str]:
    lexer = shlex.shlex(script, posix=True, punctuation_chars="();<>|&\n")
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:  # unbalanced quotes: read the words without shell grammar
        return script.split()


def _unwrap(words: list[str]) -> list[str]:
    """The command behind assignments, prefixes such as sudo or `timeout 60`, and runners such as `uv run`."""
    index = 0
    while index < len(words):
        word, program = words[index], os.path.basename(words[index])
        if _ASSIGNMENT.match(word) or program in _PREFIXES or word.startswith("-") and index > 0:
            index += 1
        elif program == "timeout":
            index += 2
        elif program in _RUNNERS and _RUNNERS[program] == "":
            index += 1
        elif program in _RUNNERS and words[index + 1 : index + 2] == [_RUNNERS[program]]:
            index += 2
        else:
            break
    return _without_redirections(words[index:])


def _without_redirections(words: list[str]) -> list[str]:
    kept: list[str] = []
    skip_next = False
    for word in words:
        if skip_next:
            skip_next = False
        elif word and set(word) <= set("<>&"):
            skip_next = True  # `> out.txt`, `2>&1`: the next word is a redirection target
        else:
            kept.append(word)
    return kept


def _head_verb(words: Sequence[str]) -> Verb:
    program, arguments = os.path.basename(words[0]), list(words[1:])
    if _is_test(program, arguments):
        return "test"
    if program in _PATCH_PROGRAMS or program == "sed" and _sed_in_place(arguments):
        return "edit"
    if program in _READ_PROGRAMS or program == "sed":
        return "read"
    if program in _SEARCH_PROGRAMS:
        return "search"
    if program == "git" and arguments:
        return _GIT_VERBS.get(arguments[0], "run")
    return "run"


def _is_test(program: str, arguments: list[str]) -> bool:
    first = arguments[0] if arguments else ""
    if program in _TEST_PROGRAMS:
        return True
    if _PYTHON.match(program):
        return first == "-m" and len(arguments) > 1 and arguments[1] in _PYTHON_TEST_MODULES
    if program in _PACKAGE_MANAGERS:
        script = arguments[1] if first == "run" and len(arguments) > 1 else first
        return script == "t" or script.startswith("test")
    if program == "make":
        return any(word in ("test", "check") or word.startswith("test") for word in arguments)
    return first in _TEST_SUBCOMMANDS.get(program, ())


def _sed_in_place(arguments: list[str]) -> bool:
    return any(word.startswith("-i") or word == "--in-place" for word in arguments)


def _files(words: Sequence[str], verb: Verb) -> Iterator[str]:
    program = os.path.basename(words[0])
    if verb not in ("read", "edit", "test") or program == "git":  # git's operands are often revisions
        return
    arguments = _sed_files(words[1:]) if program == "sed" else words[1:]
    for word in arguments:
        if not word.startswith("-") and _looks_like_path(word.split("::", 1)[0]):
            yield _clean_path(word.split("::", 1)[0])


def _sed_files(arguments: Sequence[str]) -> list[str]:
    """sed's operands after its script (the first operand, unless -e or -f gave one)."""
    files: list[str] = []
    script_given, skip_next = False, False
    for word in arguments:
        if skip_next:
            skip_next = False
        elif word in ("-e", "--expression", "-f", "--file"):
            script_given, skip_next = True, True
        elif word.startswith("-"):
            continue
        elif script_given:
            files.append(word)
        else:
            script_given = True
    return files


def _looks_like_path(word: str) -> bool:
    if not word or _NOT_A_PATH.search(word):
        return False
    return "/" in word.strip("/") or bool(_EXTENSION.search(word))


def _clean_path(path: str) -> str:
    return path.removeprefix("./")
