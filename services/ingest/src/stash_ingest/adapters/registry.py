"""The registry of format adapters, and `auto` detection by the payload's shape."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from stash_common.errors import InvalidArgument
from stash_ingest.adapters import (
    anthropic_messages,
    claude_code,
    codex,
    langfuse,
    langsmith,
    openai_chat,
    otel,
    stash,
)
from stash_ingest.adapters.reading import STREAM_FROM, Counted, first_sample, first_value
from stash_ingest.limits import DEFAULT_LIMITS, TraceLimits
from stash_ingest.traces import Trace

AUTO = "auto"


@dataclass(frozen=True)
class Adapter:
    """One input format: its name, what it reads, its parser and its shape test.

    The parser validates every trace and applies the limits while it reads (`stash_ingest.limits`)."""

    name: str
    description: str
    parse: Callable[[bytes, TraceLimits], list[Trace]]
    looks_like: Callable[[Any], bool]
    counted: Counted = field(default_factory=dict)  # what `parse` counts by streaming in a large document


# Detection tries formats in this order; the most specific shapes come first.
ADAPTERS: Mapping[str, Adapter] = {
    adapter.name: adapter
    for adapter in (
        Adapter(
            "stash",
            "Stash Trace Format JSONL: one canonical trace per line",
            stash.parse_stash,
            stash.looks_like_stash,
            stash.COUNTED,
        ),
        Adapter(
            "otel",
            "OTLP/JSON traces (request or Collector file-exporter JSONL): GenAI semconv, OpenInference, OpenLLMetry",
            otel.parse_otel,
            otel.looks_like_otel,
            otel.COUNTED,
        ),
        Adapter(
            "langfuse",
            "Langfuse trace with observations (public API response, one object or an array)",
            langfuse.parse_langfuse,
            langfuse.looks_like_langfuse,
            langfuse.COUNTED,
        ),
        Adapter(
            "langsmith",
            "LangSmith run export JSONL (or post/patch batches), one trace per trace_id",
            langsmith.parse_langsmith,
            langsmith.looks_like_langsmith,
            langsmith.COUNTED,
        ),
        Adapter(
            "claude_code",
            "Claude Code session transcript JSONL (~/.claude/projects/**/*.jsonl), one trace per file",
            claude_code.parse_claude_code,
            claude_code.looks_like_claude_code,
        ),
        Adapter(
            "codex",
            "Codex CLI rollout JSONL (~/.codex/sessions/**/rollout-*.jsonl), one trace per file",
            codex.parse_codex,
            codex.looks_like_codex,
        ),
        Adapter(
            "anthropic_messages",
            "Anthropic Messages JSONL of {system, messages} with text, tool_use, tool_result and thinking blocks",
            anthropic_messages.parse_anthropic_messages,
            anthropic_messages.looks_like_anthropic_messages,
            anthropic_messages.COUNTED,
        ),
        Adapter(
            "openai_chat",
            "OpenAI chat JSONL of {messages} (fine-tuning format) or a JSON array of messages, with tool calls",
            openai_chat.parse_openai_chat,
            openai_chat.looks_like_openai_chat,
            openai_chat.COUNTED,
        ),
    )
}

# Growing snapshots of a running agent's own transcript: later uploads append steps.
NATIVE_FORMATS: frozenset[str] = frozenset({"claude_code", "codex"})


def get_adapter(name: str) -> Adapter:
    """The adapter registered under `name`; an unknown name lists the supported ones."""
    try:
        return ADAPTERS[name]
    except KeyError:
        supported = ", ".join([*ADAPTERS, AUTO])
        raise InvalidArgument("format", f"unknown format {name!r}; supported: {supported}") from None


def detect(raw: bytes, limits: TraceLimits = DEFAULT_LIMITS) -> str:
    """The name of the first format whose shape the payload's first JSON value has.

    A large payload's likely format is told from its first bytes (`first_sample`), and the arrays that format
    counts are counted before the first value is parsed whole: a document far over a limit is refused as that
    format would refuse it, without being built."""
    likely = _first_match(first_sample(raw)) if len(raw) >= STREAM_FROM else None
    found = _first_match(first_value(raw, likely.counted if likely else None, limits))
    if found is None:
        tried = ", ".join(ADAPTERS)
        raise InvalidArgument("format", f"could not detect the format of the payload; tried: {tried}")
    return found.name


def _first_match(value: Any) -> Adapter | None:
    if isinstance(value, list) and value:
        value = value[0]  # a sample of a top-level array: its first item, as `first_value` reads one
    return next((adapter for adapter in ADAPTERS.values() if adapter.looks_like(value)), None)


def resolve_adapter(name: str, raw: bytes, limits: TraceLimits = DEFAULT_LIMITS) -> Adapter:
    """The named adapter, or the detected one for `auto`."""
    return get_adapter(detect(raw, limits) if name == AUTO else name)
