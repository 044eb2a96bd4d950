"""OpenInference (Arize Phoenix): `openinference.span.kind` and `llm.{input,output}_messages.<i>.message.*`.

OpenInference types every span it writes (LLM, CHAIN, TOOL, AGENT, RETRIEVER, EMBEDDING, …), and only
its LLM spans are read as calls: what the other spans did reappears in the next LLM call's input.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stash_ingest.otel.conventions.flattened import flat_messages
from stash_ingest.otel.messages import Located
from stash_ingest.otel.spans import SpanView, recorded_kind

SPAN_KIND = "openinference.span.kind"


def is_not_llm_call(attributes: Mapping[str, Any]) -> bool:
    """True when OpenInference typed the span as something other than LLM."""
    span_kind = attributes.get(SPAN_KIND)
    return isinstance(span_kind, str) and span_kind.upper() != "LLM"


def span_kind(attributes: Mapping[str, Any]) -> str | None:
    """The OpenInference span kind, lower-cased (llm, chain, tool, …)."""
    return recorded_kind(attributes, SPAN_KIND)


def input_messages(view: SpanView, where: str) -> list[Located] | None:
    """`llm.input_messages.*` (a message without a role is the user's); None when absent."""
    return flat_messages(view.attributes, "llm.input_messages", "message.", "user", where)


def output_messages(view: SpanView, where: str) -> list[Located] | None:
    """`llm.output_messages.*` (a message without a role is the assistant's); None when absent."""
    return flat_messages(view.attributes, "llm.output_messages", "message.", "assistant", where)
