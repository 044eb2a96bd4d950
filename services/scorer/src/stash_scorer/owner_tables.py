"""The owner's trace scores and action scores as tables of the gateway's SQL (`scores`, `action_scores`)."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from sqlalchemy import select
from sqlalchemy.orm import Session

from stash_common.owner_rows import UTC_TIME, OwnerTable, row_batches, selected_rows
from stash_scorer.store import ActionScoreRow, TraceScoreRow

SCORES = pa.schema(
    [
        ("trace_id", pa.string()),
        ("reward_model_id", pa.string()),
        ("reward_model_name", pa.string()),
        ("trace_revision", pa.int32()),
        ("score", pa.float64()),
        ("created_at", UTC_TIME),
    ]
)
ACTION_SCORES = pa.schema(
    [
        ("trace_id", pa.string()),
        ("step_id", pa.string()),
        ("step_index", pa.int32()),
        ("reward_model_id", pa.string()),
        ("reward_model_name", pa.string()),
        ("trace_revision", pa.int32()),
        ("score", pa.float64()),
        ("credit", pa.float64()),
        ("created_at", UTC_TIME),
    ]
)


def _scores(session: Session, owner_id: str) -> Iterator[pa.RecordBatch]:
    query = (
        select(
            TraceScoreRow.trace_id,
            TraceScoreRow.reward_model_id,
            TraceScoreRow.reward_model_name,
            TraceScoreRow.trace_revision,
            TraceScoreRow.score,
            TraceScoreRow.created_at,
        )
        .where(TraceScoreRow.owner_id == owner_id)
        .order_by(TraceScoreRow.trace_id, TraceScoreRow.reward_model_id)
    )
    return row_batches(SCORES, selected_rows(session, query))


def _action_scores(session: Session, owner_id: str) -> Iterator[pa.RecordBatch]:
    query = select(
        ActionScoreRow.trace_id,
        ActionScoreRow.step_id,
        ActionScoreRow.step_index,
        ActionScoreRow.reward_model_id,
        ActionScoreRow.reward_model_name,
        ActionScoreRow.trace_revision,
        ActionScoreRow.score,
        ActionScoreRow.credit,
        ActionScoreRow.created_at,
    ).where(ActionScoreRow.owner_id == owner_id)  # no ORDER BY: a query orders what it needs
    return row_batches(ACTION_SCORES, selected_rows(session, query))


TABLES = (OwnerTable("scores", SCORES, _scores), OwnerTable("action_scores", ACTION_SCORES, _action_scores))
