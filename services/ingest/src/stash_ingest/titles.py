"""Titles for traces that arrive without one.

With an Anthropic key configured, the fast model writes a short task summary; if that
call fails the import fails (the spec's rule), so no trace is stored half-titled. Without
a key, the title is derived deterministically from the first user request.
"""

from __future__ import annotations

from stash_common.errors import Unavailable
from stash_common.titles import shorten, title_line
from stash_ingest.traces import Trace

EXCERPT_CHARS = 4000
PROMPT = (
    "Here is the start of an AI agent's conversation. Write a title of at most eight words that says "
    "what the user asked the agent to do. Answer with the title only, no quotes.\n\n{excerpt}"
)


def derive_title(trace: Trace) -> str:
    """The first user request's title line (a slash command's name, no markup); the first message's when no
    user spoke."""
    users = (title_line(step.content) for step in trace.steps if step.role == "user")
    anyone = (title_line(step.content) for step in trace.steps)
    return next(filter(None, users), None) or next(filter(None, anyone), None) or "Untitled trace"


class ModelTitles:
    """Titles from Anthropic's fast model, through the official client."""

    def __init__(self, api_key: str, model: str, base_url: str | None = None) -> None:
        import anthropic  # seconds of start-up: only an ingest with a key loads the SDK

        self.client = anthropic.Anthropic(api_key=api_key, base_url=base_url, max_retries=2, timeout=30.0)
        self.api_error = anthropic.APIError
        self.model = model

    def __call__(self, trace: Trace) -> str:
        """A generated title; any provider failure is Unavailable, which fails the import."""
        try:
            message = self.client.messages.create(
                model=self.model,
                max_tokens=40,
                messages=[{"role": "user", "content": PROMPT.format(excerpt=excerpt(trace))}],
            )
        except self.api_error as error:
            raise Unavailable(f"title generation with {self.model} failed: {error}") from None
        text = "".join(block.text for block in message.content if block.type == "text").strip().strip('"')
        if not text:
            raise Unavailable(f"title generation with {self.model} returned no text")
        return shorten(text)


def excerpt(trace: Trace) -> str:
    """The first messages of a trace, bounded, as `role: content` lines."""
    lines = [f"{step.role}: {step.content}" for step in trace.steps if step.content.strip()]
    return "\n".join(lines)[:EXCERPT_CHARS]
