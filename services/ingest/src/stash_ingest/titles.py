"""Titles for traces that arrive without one.

With an Anthropic key configured, the fast model writes a short task summary; if that
call fails the import fails (the spec's rule), so no trace is stored half-titled. Without
a key, the title is derived deterministically from the first user request.
"""

from __future__ import annotations

import re

import anthropic

from stash_common.errors import Unavailable
from stash_ingest.traces import Trace

TITLE_MAX = 80
EXCERPT_CHARS = 4000
PROMPT = (
    "Here is the start of an AI agent's conversation. Write a title of at most eight words that says "
    "what the user asked the agent to do. Answer with the title only, no quotes.\n\n{excerpt}"
)


def derive_title(trace: Trace) -> str:
    """The first user request, on one line and shortened; the first message when no user spoke."""
    step = next((step for step in trace.steps if step.role == "user" and step.content.strip()), None)
    step = step or next((step for step in trace.steps if step.content.strip()), None)
    return shorten(step.content) if step else "Untitled trace"


def shorten(text: str, limit: int = TITLE_MAX) -> str:
    """Collapse whitespace and cut at a word boundary with an ellipsis."""
    flat = re.sub(r"\s+", " ", text).strip()
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 1].rsplit(" ", 1)[0] or flat[: limit - 1]
    return cut + "…"


class ModelTitles:
    """Titles from Anthropic's fast model, through the official client."""

    def __init__(self, api_key: str, model: str, base_url: str | None = None) -> None:
        self.client = anthropic.Anthropic(api_key=api_key, base_url=base_url, max_retries=2, timeout=30.0)
        self.model = model

    def __call__(self, trace: Trace) -> str:
        """A generated title; any provider failure is Unavailable, which fails the import."""
        try:
            message = self.client.messages.create(
                model=self.model,
                max_tokens=40,
                messages=[{"role": "user", "content": PROMPT.format(excerpt=excerpt(trace))}],
            )
        except anthropic.APIError as error:
            raise Unavailable(f"title generation with {self.model} failed: {error}") from None
        text = "".join(block.text for block in message.content if block.type == "text").strip().strip('"')
        if not text:
            raise Unavailable(f"title generation with {self.model} returned no text")
        return shorten(text)


def excerpt(trace: Trace) -> str:
    """The first messages of a trace, bounded, as `role: content` lines."""
    lines = [f"{step.role}: {step.content}" for step in trace.steps if step.content.strip()]
    return "\n".join(lines)[:EXCERPT_CHARS]
