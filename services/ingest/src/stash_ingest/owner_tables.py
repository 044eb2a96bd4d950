"""The owner's traces, steps and annotations as tables of the gateway's SQL: their columns and the reads behind them.

JSON columns (metadata, tool inputs, quotes) are read as their stored text and typed `arrow.json`, which
DuckDB loads as JSON without parsing them here.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from sqlalchemy import Text, cast, select
from sqlalchemy.orm import Session

from stash_common.owner_rows import (
    UTC_TIME,
    OwnerTable,
    row_batches,
    selected_rows,
)
from stash_ingest.store import AnnotationRow, StepRow, TraceRow

TRACES = pa.schema(
    [
        ("id", pa.string()),
        ("external_id", pa.string()),
        ("title", pa.string()),
        ("source_format", pa.string()),
        ("source_id", pa.string()),
        ("step_count", pa.int32()),
        ("revision", pa.int32()),
        ("metadata", pa.json_()),
        ("created_at", UTC_TIME),
        ("updated_at", UTC_TIME),
    ]
)
STEPS = pa.schema(
    [
        ("id", pa.string()),
        ("trace_id", pa.string()),
        ("step_index", pa.int32()),
        ("role", pa.string()),
        ("content", pa.string()),
        ("tool_name", pa.string()),
        ("tool_input", pa.json_()),
        ("tool_call_id", pa.string()),
        ("metadata", pa.json_()),
    ]
)
ANNOTATIONS = pa.schema(
    [
        ("id", pa.string()),
        ("trace_id", pa.string()),
        ("step_id", pa.string()),
        ("step_index", pa.int32()),
        ("rating", pa.int32()),
        ("comment", pa.string()),
        ("quote", pa.json_()),
        ("label_error", pa.bool_()),
        ("label_error_note", pa.string()),
        ("author_id", pa.string()),
        ("author_name", pa.string()),
        ("created_at", UTC_TIME),
        ("updated_at", UTC_TIME),
    ]
)


def _traces(session: Session, owner_id: str) -> Iterator[pa.RecordBatch]:
    query = (
        select(
            TraceRow.id,
            TraceRow.external_id,
            TraceRow.title,
            TraceRow.source_format,
            TraceRow.source_id,
            TraceRow.step_count,
            TraceRow.revision,
            cast(TraceRow.trace_metadata, Text),
            TraceRow.created_at,
            TraceRow.updated_at,
        )
        .where(TraceRow.owner_id == owner_id)
        .order_by(TraceRow.created_at, TraceRow.id)
    )
    return row_batches(TRACES, selected_rows(session, query))


def _steps(session: Session, owner_id: str) -> Iterator[pa.RecordBatch]:
    query = (
        select(
            StepRow.id,
            StepRow.trace_id,
            StepRow.position,
            StepRow.role,
            StepRow.content,
            StepRow.tool_name,
            cast(StepRow.tool_input, Text),
            StepRow.tool_call_id,
            cast(StepRow.step_metadata, Text),
        )
        .join(TraceRow, TraceRow.id == StepRow.trace_id)
        .where(TraceRow.owner_id == owner_id)
    )  # no ORDER BY: sorting the largest table costs more than a query's own ORDER BY
    return row_batches(STEPS, selected_rows(session, query))


def _annotations(session: Session, owner_id: str) -> Iterator[pa.RecordBatch]:
    query = (
        select(
            AnnotationRow.id,
            AnnotationRow.trace_id,
            AnnotationRow.step_id,
            StepRow.position,
            AnnotationRow.rating,
            AnnotationRow.comment,
            cast(AnnotationRow.quote, Text),
            AnnotationRow.label_error,
            AnnotationRow.label_error_note,
            AnnotationRow.author_id,
            AnnotationRow.author_name,
            AnnotationRow.created_at,
            AnnotationRow.updated_at,
        )
        .outerjoin(StepRow, StepRow.id == AnnotationRow.step_id)
        .where(AnnotationRow.owner_id == owner_id)
        .order_by(AnnotationRow.created_at, AnnotationRow.id)
    )
    return row_batches(ANNOTATIONS, selected_rows(session, query))


TABLES = (
    OwnerTable("traces", TRACES, _traces),
    OwnerTable("steps", STEPS, _steps),
    OwnerTable("annotations", ANNOTATIONS, _annotations),
)
