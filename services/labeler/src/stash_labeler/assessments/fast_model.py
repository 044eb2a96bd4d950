"""The fast Anthropic model, asked for one forced tool call whose input schema names every answer field.

Forcing the tool (`tool_choice`) binds the answer to the schema's named fields; anything else the
provider answers (an error, no tool call) is a `ModelFailure` with a reason the API shows.
"""

from __future__ import annotations

from typing import Any, Protocol

MAX_TOKENS = 4000
TIMEOUT_S = 60.0
MISSING_KEY = "no fast model is configured: set STASH_ANTHROPIC_API_KEY (and optionally STASH_FAST_MODEL)"


class ModelFailure(Exception):
    """The model gave no usable answer; the message says why."""


class FastModel(Protocol):
    """Answers a prompt with the input of the named tool, as a JSON object."""

    def answer(self, prompt: str, tool: str, schema: dict[str, Any]) -> dict[str, Any]: ...


class AnthropicFastModel:
    """`FastModel` through the official anthropic client."""

    def __init__(self, api_key: str, model: str, base_url: str | None = None) -> None:
        import anthropic  # seconds of start-up: only a labeler with a key loads the SDK

        self.client = anthropic.Anthropic(api_key=api_key, base_url=base_url, max_retries=1, timeout=TIMEOUT_S)
        self.api_error = anthropic.APIError
        self.model = model

    def answer(self, prompt: str, tool: str, schema: dict[str, Any]) -> dict[str, Any]:
        """The forced tool call's input; ModelFailure for a provider error or an answer without it."""
        try:
            message = self.client.messages.create(
                model=self.model,
                max_tokens=MAX_TOKENS,
                tools=[{"name": tool, "description": "Record the assessment.", "input_schema": schema}],
                tool_choice={"type": "tool", "name": tool},
                messages=[{"role": "user", "content": prompt}],
            )
        except self.api_error as error:
            raise ModelFailure(f"{self.model} failed: {error}") from None
        for block in message.content:
            if block.type == "tool_use" and block.name == tool and isinstance(block.input, dict):
                return block.input
        raise ModelFailure(f"{self.model} answered without calling {tool}")
