"""Protobuf messages from the services rendered as the REST API's JSON shapes (spec: REST API).

Enum values are rendered from their proto names, never from their numbers: the REST string is
the value's name without the enum's prefix, in lower case (`JOB_STATUS_SUCCEEDED` → `succeeded`),
so a value added to a proto reaches the API without a second table to keep in step.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

from google.protobuf.descriptor import EnumDescriptor
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message

from stash.rm.v1 import common_pb2, ingest_pb2
from stash_common.messages import json_of

_WORD_START = re.compile(r"(?<!^)(?=[A-Z])")


class ProtoEnum(Protocol):
    """A generated enum (`common_pb2.JobStatus`, …): what `enum_name` reads of it."""

    DESCRIPTOR: EnumDescriptor


def enum_name(enum: ProtoEnum, value: int) -> str | None:
    """The REST spelling of an enum value; None for the unspecified value or one this build does not know."""
    descriptor = enum.DESCRIPTOR
    # buf's ENUM_VALUE_PREFIX rule: every value starts with the enum's name in UPPER_SNAKE_CASE.
    prefix = _WORD_START.sub("_", descriptor.name).upper() + "_"
    known = descriptor.values_by_number.get(value)
    if known is None or known.name == f"{prefix}UNSPECIFIED":
        return None
    return known.name.removeprefix(prefix).lower()


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


def message_json(message: Message) -> dict[str, Any]:
    """A response message as JSON with the proto's field names and every field present (enums by their full
    proto names): for messages the REST API passes on as they are."""
    return MessageToDict(message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)


def summary_json(summary: common_pb2.TraceSummary) -> dict[str, Any]:
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


def step_json(step: common_pb2.Step) -> dict[str, Any]:
    """`Step`: `{id, index, role, content, tool_name, tool_input, tool_call_id, metadata}`."""
    return {
        "id": step.id,
        "index": step.index,
        "role": enum_name(common_pb2.StepRole, step.role),
        "content": step.content,
        "tool_name": optional(step, "tool_name"),
        "tool_input": struct_json(step, "tool_input"),
        "tool_call_id": optional(step, "tool_call_id"),
        "metadata": struct_json(step, "metadata") or {},
    }


def span_json(span: common_pb2.Span) -> dict[str, Any]:
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


def annotation_json(annotation: common_pb2.Annotation) -> dict[str, Any]:
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


def trace_detail_json(response: ingest_pb2.GetTraceResponse) -> dict[str, Any]:
    """`TraceDetail`: the summary plus metadata, steps, spans and annotations."""
    trace = response.trace
    return {
        **summary_json(response.summary),
        "metadata": struct_json(trace, "metadata") or {},
        "steps": [step_json(step) for step in trace.steps],
        "spans": [span_json(span) for span in trace.spans],
        "annotations": [annotation_json(annotation) for annotation in response.annotations],
    }
