"""Short titles from free text that people and agents write: one readable line, no markup.

Ingest titles a trace that arrives without one from its first request, and the labeler titles
sections from requests and progress messages; both read recorded text the same way. A Claude Code
slash command is recorded as `<command-message>…</command-message><command-name>/name</command-name>…`,
so its title is the command's name; a Codex desktop request follows attached files under a heading.
"""

from __future__ import annotations

import re

MAX_TITLE_CHARS = 80
_COMMAND_NAME = re.compile(r"<command-name>\s*([^<]+?)\s*</command-name>")
# Codex desktop puts attached files first and the request under this heading.
_CODEX_REQUEST = re.compile(r"^#+ My request for Codex:\s*$", re.MULTILINE)
_MARKUP = re.compile(r"<[^>]+>")


def title_line(text: str, limit: int = MAX_TITLE_CHARS) -> str:
    """A slash command's name, else the first non-blank line without markup, cut to `limit` ("" for none)."""
    command = _COMMAND_NAME.search(text)
    if command:
        return command.group(1)
    codex_request = _CODEX_REQUEST.search(text)
    if codex_request:
        text = text[codex_request.end() :]
    for line in _MARKUP.sub(" ", text).splitlines():
        words = " ".join(line.split()).lstrip("#*- ").strip()
        if words:
            return shorten(words, limit)
    return ""


def shorten(text: str, limit: int = MAX_TITLE_CHARS) -> str:
    """Whitespace collapsed, cut at a word boundary with an ellipsis when longer than `limit`."""
    flat = re.sub(r"\s+", " ", text).strip()
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 1].rsplit(" ", 1)[0] or flat[: limit - 1]
    return cut.rstrip() + "…"
