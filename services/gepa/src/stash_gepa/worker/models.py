"""The task and reflection models, called through LiteLLM with any model string it knows.

`openai/<name>` with an api_base reaches vLLM, SGLang or any OpenAI-compatible server. Errors are
sorted into two kinds: a missing key, refused credentials or a provider out of reach fail the
whole run (`ProviderUnavailable`, naming what to set), since every later call would fail the same
way; anything else (a refused request, a rate limit after LiteLLM's retries, a server's error) is
that call's failure (`ProviderError`), which the adapter records as the example's failure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import httpx
import litellm
import openai

from stash_common.errors import StashError, Unavailable

# Servers behind an api_base (vLLM, SGLang) accept any key, but LiteLLM's OpenAI client insists on one.
UNCHECKED_KEY = "unused"
REQUEST_TIMEOUT_S = 120.0
RETRIES = 2
# Failures every later call would repeat: no key, refused key, unknown model, no server at that address
# (LiteLLM raises the last as APIConnectionError, or as an InternalServerError wrapping one: `_unreachable`).
FATAL_ERRORS = (
    litellm.AuthenticationError,
    litellm.PermissionDeniedError,
    litellm.NotFoundError,
    litellm.APIConnectionError,
)


class ProviderUnavailable(Unavailable):
    """The provider cannot be used at all: the run fails with what to set."""


class ProviderError(StashError):
    """One call failed; the others may succeed."""


@dataclass(frozen=True)
class ChatModel:
    """One LiteLLM model: the task model or the reflection model."""

    role: str  # "task" or "reflection", for messages
    model: str
    api_base: str | None
    setting: str  # what a user sets to choose this model, for messages

    def check_credentials(self) -> None:
        """Fail before any work when the provider's key is not in the environment (unless an api_base serves it)."""
        if self.api_base is not None:
            return
        environment = litellm.validate_environment(model=self.model)
        if not environment["keys_in_environment"]:
            keys = " and ".join(environment["missing_keys"]) or "the provider's API key"
            raise ProviderUnavailable(
                f"the {self.role} model {self.model} needs {keys} in the gepa service's environment;"
                f" set it there, or choose another model with {self.setting}"
            )

    def complete(self, messages: Sequence[dict[str, str]]) -> str:
        """The model's reply text to `messages`."""
        try:
            response = litellm.completion(
                model=self.model,
                messages=list(messages),
                api_base=self.api_base,
                api_key=UNCHECKED_KEY if self.api_base is not None else None,
                timeout=REQUEST_TIMEOUT_S,
                num_retries=RETRIES,
            )
        except openai.APIError as error:  # every LiteLLM error
            if isinstance(error, FATAL_ERRORS) or _unreachable(error):
                raise ProviderUnavailable(self._unusable(error)) from error
            raise ProviderError(f"the {self.role} model {self.model} failed: {_reason(error)}") from error
        text = response.choices[0].message.content
        if not text:
            raise ProviderError(f"the {self.role} model {self.model} returned an empty reply")
        return str(text)

    def _unusable(self, error: Exception) -> str:
        where = f" at {self.api_base}" if self.api_base else ""
        reason, hint = _reason(error), _hint(error)
        return f"the {self.role} model {self.model}{where} cannot be used ({reason}): {hint}, or set {self.setting}"


def _hint(error: Exception) -> str:
    """What to check for a failure every later call would repeat."""
    if _unreachable(error):
        return "check that the server is running and reachable from the worker"
    if isinstance(error, litellm.NotFoundError):
        return "check the model's name"
    return "check the provider's API key in the gepa service's environment"


def _unreachable(error: BaseException) -> bool:
    """Whether a LiteLLM error was caused by a connection that never opened.

    LiteLLM reports a refused or unresolvable OpenAI-compatible server as an InternalServerError; only
    the exception it wraps says that no server answered.
    """
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, httpx.TransportError | openai.APIConnectionError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _reason(error: Exception) -> str:
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text[:300]}"
