"""The tables the trainer owns: reward models with their lifecycle, and the pairs each one trained on.

A model moves queued → running → succeeded | failed. Only a queued model can be claimed, so a
duplicate delivery cannot start it twice; each claim gets a new `job_id`, and reports from an
older launch are refused. A failed model can be queued again with the same id and traces.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import JSON, DateTime, Index, Integer, String, Text, delete, select, update
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from stash_common.db import new_id, utc_now
from stash_common.errors import FailedPrecondition, NotFound

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
QUEUED, RUNNING, SUCCEEDED, FAILED = "queued", "running", "succeeded", "failed"


class Base(DeclarativeBase):
    """Metadata of the tables the trainer owns."""

    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON, Any: JSON}


class RewardModelRow(Base):
    """One personal reward model and where its training stands."""

    __tablename__ = "reward_models"
    __table_args__ = (
        Index("ix_reward_models_owner_created", "owner_id", "created_at"),
        Index("ix_reward_models_status", "status"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    owner_id: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(200))
    base_model: Mapped[str] = mapped_column(String(500))
    compute: Mapped[str] = mapped_column(String(20))
    epochs: Mapped[int] = mapped_column(Integer)
    max_pairs: Mapped[int] = mapped_column(Integer)
    training_config: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    trace_ids: Mapped[list[Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(20), default=QUEUED)
    job_id: Mapped[str | None] = mapped_column(String(36))
    num_pairs: Mapped[int | None] = mapped_column(Integer)
    metrics: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    progress: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    # Findings of the feedback extraction; None until extraction was recorded.
    feedback: Mapped[list[Any] | None] = mapped_column(JSON)
    error: Mapped[str | None] = mapped_column(Text)
    artifact_key: Mapped[str | None] = mapped_column(String(500))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)
    claimed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class TrainingPairRow(Base):
    """One preference pair a model trained on, with its evidence (the pair export reads these)."""

    __tablename__ = "training_pairs"

    reward_model_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    owner_id: Mapped[str] = mapped_column(String(64), index=True)
    pair: Mapped[dict[str, Any]] = mapped_column(JSON)


def find_model(session: Session, owner_id: str, model_id: str) -> RewardModelRow:
    """The owner's model; another owner's is simply not found."""
    row = session.get(RewardModelRow, model_id)
    if row is None or row.owner_id != owner_id:
        raise NotFound(f"reward model {model_id} not found")
    return row


def list_models(session: Session, owner_id: str) -> list[RewardModelRow]:
    """The owner's models, newest first."""
    query = select(RewardModelRow).where(RewardModelRow.owner_id == owner_id)
    return list(session.scalars(query.order_by(RewardModelRow.created_at.desc(), RewardModelRow.id)))


def queued_ids(session: Session, limit: int) -> list[str]:
    """The oldest queued models."""
    query = select(RewardModelRow.id).where(RewardModelRow.status == QUEUED).order_by(RewardModelRow.created_at)
    return list(session.scalars(query.limit(limit)))


def claim(session: Session, model_id: str) -> str | None:
    """Move a queued model to running under a new job id; None when another claimer won."""
    job_id = new_id()
    claimed = session.execute(
        update(RewardModelRow)
        .where(RewardModelRow.id == model_id, RewardModelRow.status == QUEUED)
        .values(status=RUNNING, job_id=job_id, claimed_at=utc_now(), progress={"stage": "preparing"})
    )
    return job_id if claimed.rowcount == 1 else None  # type: ignore[attr-defined]


def retry(session: Session, owner_id: str, model_id: str) -> RewardModelRow:
    """Queue a failed model again, keeping its id and traces."""
    row = find_model(session, owner_id, model_id)
    if row.status != FAILED:
        raise FailedPrecondition(f"reward model {model_id} is {row.status}; only a failed model can be retried")
    row.status, row.error, row.job_id, row.metrics, row.num_pairs = QUEUED, None, None, None, None
    row.progress, row.feedback, row.artifact_key = {}, None, None
    row.claimed_at = row.started_at = row.finished_at = None
    return row


def running_job(session: Session, model_id: str, job_id: str) -> RewardModelRow:
    """The running model of this launch; a report from a superseded or finished launch is refused."""
    row = session.get(RewardModelRow, model_id, with_for_update=True)
    if row is None:
        raise NotFound(f"reward model {model_id} not found")
    if row.status != RUNNING or row.job_id != job_id:
        raise FailedPrecondition(f"job {job_id} of reward model {model_id} is no longer running")
    return row


def save_pairs(session: Session, row: RewardModelRow, pairs: Sequence[dict[str, Any]]) -> None:
    """Replace the model's recorded training pairs."""
    session.execute(delete(TrainingPairRow).where(TrainingPairRow.reward_model_id == row.id))
    session.add_all(
        TrainingPairRow(reward_model_id=row.id, position=position, owner_id=row.owner_id, pair=pair)
        for position, pair in enumerate(pairs)
    )


def exported_pairs(session: Session, owner_id: str, model_id: str | None) -> list[TrainingPairRow]:
    """The owner's recorded pairs (of one model), in model then pair order."""
    query = select(TrainingPairRow).where(TrainingPairRow.owner_id == owner_id)
    if model_id is not None:
        query = query.where(TrainingPairRow.reward_model_id == model_id)
    return list(session.scalars(query.order_by(TrainingPairRow.reward_model_id, TrainingPairRow.position)))


def finish(row: RewardModelRow, status: str, error: str | None = None) -> None:
    """Settle a running model."""
    row.status, row.error, row.finished_at = status, error, utc_now()


def fail_stale(session: Session, submit_timeout: timedelta, job_timeout: timedelta) -> list[str]:
    """Fail interrupted submissions (claimed, never started) and overdue jobs; returns their ids."""
    now = utc_now()
    running = list(session.scalars(select(RewardModelRow).where(RewardModelRow.status == RUNNING)))
    failed = []
    for row in running:
        if row.started_at is None and row.claimed_at is not None and row.claimed_at < now - submit_timeout:
            finish(row, FAILED, f"the job was interrupted before it started (over {_minutes(submit_timeout)}); retry")
        elif row.started_at is not None and row.started_at < now - job_timeout:
            finish(row, FAILED, f"the job did not finish within {_minutes(job_timeout)}; retry")
        else:
            continue
        failed.append(row.id)
    return failed


def _minutes(span: timedelta) -> str:
    return f"{span.total_seconds() / 60:g} minutes"
