"""The owner's step labels, evaluations and process patterns as tables of the gateway's SQL.

`step_labels` flattens each trace's newest succeeded evaluation: one row per step, with the label's fields
(the spec's schema) and the fixed-rule reward as columns. The saved bodies are JSON text; Arrow's JSON
reader parses a batch of them at once into the columns it needs, without a Python object per value.
`evaluations` lists every revision's evaluation, queued and failed ones included; `process_patterns` the
findings of each trace's latest evaluated revision.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from pyarrow import json as arrow_json
from sqlalchemy import Text, and_, cast, func, select
from sqlalchemy.orm import Session

from stash_common.owner_rows import UTC_TIME, OwnerTable, row_batches, selected_rows
from stash_labeler.label_schema import StepLabel
from stash_labeler.store import SUCCEEDED, EvaluationRow, ProcessFindingRow

# The label's own fields; its chunk_id is the step's.
LABEL_FIELDS = tuple(name for name in StepLabel.model_fields if name != "chunk_id")
REWARD_FIELDS = ("points", "passed_back", "credit")
STEP_LABELS = pa.schema(
    [
        ("trace_id", pa.string()),
        ("revision", pa.int32()),
        ("step_id", pa.string()),
        ("step_index", pa.int32()),
        ("chunk_id", pa.string()),
        ("label_source", pa.string()),
        ("label_model", pa.string()),
        *((name, pa.bool_() if name == "is_output" else pa.string()) for name in LABEL_FIELDS),
        *((name, pa.float64()) for name in REWARD_FIELDS),
        ("expected_credit", pa.float64()),
        ("ordinal_credit", pa.int32()),
    ]
)
# What is read of a saved evaluation body ({"steps": [...], ...}); other keys are skipped.
_LABEL = pa.struct([(name, STEP_LABELS.field(name).type) for name in LABEL_FIELDS])
_REWARD = pa.struct([(name, pa.float64()) for name in REWARD_FIELDS])
_STEP = pa.struct(
    [
        *((name, STEP_LABELS.field(name).type) for name in ("step_id", "step_index", "chunk_id")),
        *((name, STEP_LABELS.field(name).type) for name in ("label_source", "label_model")),
        ("label", _LABEL),
        ("reward", _REWARD),
        ("expected_credit", pa.float64()),
        ("ordinal_credit", pa.int32()),
    ]
)
_BODY = arrow_json.ParseOptions(
    explicit_schema=pa.schema([("steps", pa.list_(_STEP))]), unexpected_field_behavior="ignore"
)
BODIES_PER_BATCH = 200
EVALUATIONS = pa.schema(
    [
        ("id", pa.string()),
        ("trace_id", pa.string()),
        ("revision", pa.int32()),
        ("status", pa.string()),
        ("error", pa.string()),
        ("labeler", pa.string()),
        ("score", pa.float64()),
        ("outcome", pa.string()),
        ("created_at", UTC_TIME),
        ("updated_at", UTC_TIME),
        ("finished_at", UTC_TIME),
    ]
)
PROCESS_PATTERNS = pa.schema(
    [
        ("id", pa.string()),
        ("trace_id", pa.string()),
        ("revision", pa.int32()),
        ("pattern", pa.string()),
        ("taxonomy", pa.string()),
        ("severity", pa.int32()),
        ("source", pa.string()),
        ("confidence", pa.float64()),
        ("first_step_id", pa.string()),
        ("last_step_id", pa.string()),
        ("first_step_index", pa.int32()),
        ("last_step_index", pa.int32()),
        ("suggestion", pa.string()),
        ("created_at", UTC_TIME),
    ]
)


def _step_labels(session: Session, owner_id: str) -> Iterator[pa.RecordBatch]:
    newest = (
        select(EvaluationRow.trace_id, func.max(EvaluationRow.revision).label("revision"))
        .where(EvaluationRow.owner_id == owner_id, EvaluationRow.status == SUCCEEDED)
        .group_by(EvaluationRow.trace_id)
        .subquery()
    )
    query = (
        select(EvaluationRow.trace_id, EvaluationRow.revision, cast(EvaluationRow.body, Text))
        .join(newest, and_(EvaluationRow.trace_id == newest.c.trace_id, EvaluationRow.revision == newest.c.revision))
        .where(EvaluationRow.body.is_not(None))
        .order_by(EvaluationRow.trace_id)
        .execution_options(yield_per=BODIES_PER_BATCH)
    )
    for evaluations in session.connection().execute(query).partitions():
        yield _step_label_batch(evaluations)


def _step_label_batch(evaluations: Sequence[Sequence[str | int]]) -> pa.RecordBatch:
    """One row per step of these (trace id, revision, body) evaluations."""
    trace_ids, revisions, bodies = zip(*evaluations, strict=True)
    # Saved bodies are compact JSON (no raw newline), so they join into newline-delimited JSON.
    data = pa.py_buffer("\n".join(str(body) for body in bodies).encode())
    steps = arrow_json.read_json(data, parse_options=_BODY).column("steps").combine_chunks()
    parent = pc.list_parent_indices(steps)
    step = pc.list_flatten(steps)
    label, reward = pc.struct_field(step, "label"), pc.struct_field(step, "reward")
    columns = [
        pc.take(pa.array(trace_ids, pa.string()), parent),
        pc.take(pa.array(revisions, pa.int32()), parent),
        *(pc.struct_field(step, name) for name in ("step_id", "step_index", "chunk_id", "label_source", "label_model")),
        *(pc.struct_field(label, name) for name in LABEL_FIELDS),
        *(pc.struct_field(reward, name) for name in REWARD_FIELDS),
        pc.struct_field(step, "expected_credit"),
        pc.struct_field(step, "ordinal_credit"),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=STEP_LABELS)


def _evaluations(session: Session, owner_id: str) -> Iterator[pa.RecordBatch]:
    query = (
        select(
            EvaluationRow.id,
            EvaluationRow.trace_id,
            EvaluationRow.revision,
            EvaluationRow.status,
            EvaluationRow.error,
            EvaluationRow.labeler,
            EvaluationRow.trace_score,
            EvaluationRow.outcome,
            EvaluationRow.created_at,
            EvaluationRow.updated_at,
            EvaluationRow.finished_at,
        )
        .where(EvaluationRow.owner_id == owner_id)
        .order_by(EvaluationRow.trace_id, EvaluationRow.revision)
    )
    return row_batches(EVALUATIONS, selected_rows(session, query))


def _process_patterns(session: Session, owner_id: str) -> Iterator[pa.RecordBatch]:
    query = (
        select(
            ProcessFindingRow.id,
            ProcessFindingRow.trace_id,
            ProcessFindingRow.revision,
            ProcessFindingRow.pattern,
            ProcessFindingRow.taxonomy,
            ProcessFindingRow.severity,
            ProcessFindingRow.source,
            ProcessFindingRow.confidence,
            ProcessFindingRow.first_step_id,
            ProcessFindingRow.last_step_id,
            ProcessFindingRow.first_step_index,
            ProcessFindingRow.last_step_index,
            ProcessFindingRow.suggestion,
            ProcessFindingRow.created_at,
        )
        .where(ProcessFindingRow.owner_id == owner_id)
        .order_by(ProcessFindingRow.trace_id, ProcessFindingRow.first_step_index)
    )
    return row_batches(PROCESS_PATTERNS, selected_rows(session, query))


TABLES = (
    OwnerTable("step_labels", STEP_LABELS, _step_labels),
    OwnerTable("evaluations", EVALUATIONS, _evaluations),
    OwnerTable("process_patterns", PROCESS_PATTERNS, _process_patterns),
)
