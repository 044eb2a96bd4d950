"""OpenLLMetry (Traceloop): `traceloop.span.kind`, `llm.request.type` and `gen_ai.{prompt,completion}.<i>.*`.

OpenLLMetry marks only its own workflow, task, agent and tool spans with `traceloop.span.kind`;
the LLM calls themselves carry none, so any span with that key is not an LLM call. Its embedding
and rerank calls put their inputs in `gen_ai.prompt.*` too, so `llm.request.type` rules them out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stash_ingest.otel.conventions.flattened import flat_messages
from stash_ingest.otel.messages import Located
from stash_ingest.otel.spans import SpanView, recorded_kind

SPAN_KIND = "traceloop.span.kind"
NOT_LLM_REQUESTS = ("embedding", "rerank")


def is_not_llm_call(attributes: Mapping[str, Any]) -> bool:
    """True for OpenLLMetry's workflow/task/agent/tool spans and its embedding and rerank calls."""
    return attributes.get("llm.request.type") in NOT_LLM_REQUESTS or attributes.get(SPAN_KIND) is not None


def span_kind(attributes: Mapping[str, Any]) -> str | None:
    """The Traceloop span kind, lower-cased (workflow, task, agent, tool)."""
    return recorded_kind(attributes, SPAN_KIND)


def prompt_messages(view: SpanView, where: str) -> list[Located] | None:
    """`gen_ai.prompt.*` (a message without a role is the user's); None when absent."""
    return flat_messages(view.attributes, "gen_ai.prompt", "", "user", where)


def completion_messages(view: SpanView, where: str) -> list[Located] | None:
    """`gen_ai.completion.*` (a message without a role is the assistant's); None when absent."""
    return flat_messages(view.attributes, "gen_ai.completion", "", "assistant", where)
