"""Protobuf messages from the services rendered as the REST API's JSON shapes (spec: REST API)."""

from __future__ import annotations

from typing import Any

from google.protobuf.message import Message

from stash_common.messages import json_of

_ROLE_NAMES = {1: "system", 2: "user", 3: "assistant", 4: "tool"}


def struct_json(message: Message, field: str) -> Any:
    """A Struct or Value field as plain JSON, or None when it is not set."""
    if not message.HasField(field):
        return None
    return json_of(getattr(message, field))


def timestamp_json(message: Message, field: str) -> str | None:
    """A Timestamp field as ISO-8601 UTC (`…Z`), or None when it is not set."""
    return getattr(message, field).ToJsonString() if message.HasField(field) else None


def optional(message: Message, field: str) -> Any:
    """An `optional` scalar field's value, or None when it is not set."""
    return getattr(message, field) if message.HasField(field) else None


def summary_json(summary: Any) -> dict[str, Any]:
    """`TraceSummary`."""
    return {
        "id": summary.id,
        "external_id": optional(summary, "external_id"),
        "title": summary.title,
        "source_format": summary.source_format,
        "source_id": summary.source_id,
        "source_name": summary.source_name,
        "source_owner_id": summary.source_owner_id,
        "step_count": summary.step_count,
        "positive_count": summary.positive_count,
        "negative_count": summary.negative_count,
        "comment_count": summary.comment_count,
        "label_error_count": summary.label_error_count,
        "revision": summary.revision,
        "created_at": timestamp_json(summary, "created_at"),
        "updated_at": timestamp_json(summary, "updated_at"),
    }


def step_json(step: Any) -> dict[str, Any]:
    """`Step`: `{id, index, role, content, tool_name, tool_input, tool_call_id, metadata}`."""
    return {
        "id": step.id,
        "index": step.index,
        "role": _ROLE_NAMES[step.role],
        "content": step.content,
        "tool_name": optional(step, "tool_name"),
        "tool_input": struct_json(step, "tool_input"),
        "tool_call_id": optional(step, "tool_call_id"),
        "metadata": struct_json(step, "metadata") or {},
    }


def span_json(span: Any) -> dict[str, Any]:
    """`Span`, with nanosecond times as decimal strings so JavaScript keeps their precision."""
    return {
        "id": span.id,
        "parent_id": optional(span, "parent_id"),
        "name": span.name,
        "kind": optional(span, "kind"),
        "start_ns": str(span.start_ns),
        "end_ns": str(span.end_ns),
        "input": struct_json(span, "input"),
        "output": struct_json(span, "output"),
        "step_indices": list(span.step_indices),
    }


def annotation_json(annotation: Any) -> dict[str, Any]:
    """`Annotation`."""
    quote = annotation.quote if annotation.HasField("quote") else None
    return {
        "id": annotation.id,
        "trace_id": annotation.trace_id,
        "step_id": optional(annotation, "step_id"),
        "rating": optional(annotation, "rating"),
        "comment": optional(annotation, "comment"),
        "quote": {"text": quote.text, "prefix": quote.prefix, "suffix": quote.suffix} if quote else None,
        "label_error": annotation.label_error,
        "label_error_note": optional(annotation, "label_error_note"),
        "author_id": annotation.author_id,
        "author_name": annotation.author_name,
        "created_at": timestamp_json(annotation, "created_at"),
    }


def trace_detail_json(response: Any) -> dict[str, Any]:
    """`TraceDetail`: the summary plus metadata, steps, spans and annotations."""
    trace = response.trace
    return {
        **summary_json(response.summary),
        "metadata": struct_json(trace, "metadata") or {},
        "steps": [step_json(step) for step in trace.steps],
        "spans": [span_json(span) for span in trace.spans],
        "annotations": [annotation_json(annotation) for annotation in response.annotations],
    }
