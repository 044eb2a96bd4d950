"""The tables the trainer owns: reward models with their lifecycle, and the pairs each one trained on.

A model moves queued → running → succeeded | failed (`stash_common.jobs.lifecycle`): only a queued
model can be claimed, each claim gets a new `job_id`, and reports from an older launch are refused.
A failed model can be queued again with the same id and traces.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import JSON, Index, Integer, String, delete, select
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from stash_common.jobs import lifecycle as job_lifecycle
from stash_common.jobs.lifecycle import FAILED, QUEUED, RUNNING, SUCCEEDED, JobColumns, finish

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
__all__ = ["FAILED", "QUEUED", "RUNNING", "SUCCEEDED", "finish"]
NOUN = "reward model"


class Base(DeclarativeBase):
    """Metadata of the tables the trainer owns."""

    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON, Any: JSON}


class RewardModelRow(JobColumns, Base):
    """One personal reward model and where its training stands."""

    __tablename__ = "reward_models"
    __table_args__ = (
        Index("ix_reward_models_owner_created", "owner_id", "created_at"),
        Index("ix_reward_models_status", "status"),
    )

    name: Mapped[str] = mapped_column(String(200))
    base_model: Mapped[str] = mapped_column(String(500))
    compute: Mapped[str] = mapped_column(String(20))
    epochs: Mapped[int] = mapped_column(Integer)
    max_pairs: Mapped[int] = mapped_column(Integer)
    training_config: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    trace_ids: Mapped[list[Any]] = mapped_column(JSON)
    num_pairs: Mapped[int | None] = mapped_column(Integer)
    metrics: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # Findings of the feedback extraction; None until extraction was recorded. A retry keeps the last report
    # until its own extraction records a new one: `feedback_job_id` names the launch that recorded it.
    feedback: Mapped[list[Any] | None] = mapped_column(JSON)
    feedback_job_id: Mapped[str | None] = mapped_column(String(36))
    # Input version 3: the task groups held out for evaluation, drawn at the first launch; retries reuse them.
    eval_task_groups: Mapped[list[Any] | None] = mapped_column(JSON)
    artifact_key: Mapped[str | None] = mapped_column(String(500))


class TrainingPairRow(Base):
    """One preference pair a model trained on, with its evidence (the pair export reads these)."""

    __tablename__ = "training_pairs"

    reward_model_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    owner_id: Mapped[str] = mapped_column(String(64), index=True)
    pair: Mapped[dict[str, Any]] = mapped_column(JSON)


def find_model(session: Session, owner_id: str, model_id: str) -> RewardModelRow:
    """The owner's model; another owner's is simply not found."""
    return job_lifecycle.find(session, RewardModelRow, owner_id, model_id, NOUN)


def list_models(session: Session, owner_id: str) -> list[RewardModelRow]:
    """The owner's models, newest first."""
    return job_lifecycle.owned(session, RewardModelRow, owner_id)


def queued_ids(session: Session, limit: int) -> list[str]:
    """The oldest queued models."""
    return job_lifecycle.queued_ids(session, RewardModelRow, limit)


def claim(session: Session, model_id: str) -> str | None:
    """Move a queued model to running under a new job id; None when another claimer won."""
    return job_lifecycle.claim(session, RewardModelRow, model_id)


def retry(session: Session, owner_id: str, model_id: str) -> RewardModelRow:
    """Queue a failed model again, keeping its id, traces and last learning report (until a new one is recorded)."""
    row = job_lifecycle.requeue(session, RewardModelRow, owner_id, model_id, NOUN)
    row.metrics, row.num_pairs, row.artifact_key = None, None, None
    return row


def feedback_from_earlier_attempt(row: RewardModelRow) -> bool:
    """Whether the recorded learning report is a previous launch's, kept while a retry has not recorded its own."""
    return row.feedback is not None and row.feedback_job_id != row.job_id


def deletable_model(session: Session, owner_id: str, model_id: str) -> RewardModelRow:
    """The owner's model, unless it is queued or running (FailedPrecondition: it cannot be deleted yet)."""
    return job_lifecycle.settled(find_model(session, owner_id, model_id), NOUN)


def delete_model(session: Session, owner_id: str, model_id: str) -> None:
    """Delete a model that is not training, with its recorded pairs."""
    job_lifecycle.delete(session, RewardModelRow, owner_id, model_id, NOUN)
    session.execute(delete(TrainingPairRow).where(TrainingPairRow.reward_model_id == model_id))


def running_job(session: Session, model_id: str, job_id: str) -> RewardModelRow:
    """The running model of this launch; a report from a superseded or finished launch is refused."""
    return job_lifecycle.running_job(session, RewardModelRow, model_id, job_id, NOUN)


def completing_job(session: Session, model_id: str, job_id: str) -> RewardModelRow | None:
    """The running model this launch's completion settles; None when this launch settled it already."""
    return job_lifecycle.completing_job(session, RewardModelRow, model_id, job_id, NOUN)


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


def fail_stale(session: Session, submit_timeout: timedelta, job_timeout: timedelta) -> list[str]:
    """Fail interrupted submissions (claimed, never started) and overdue jobs; returns their ids."""
    return job_lifecycle.fail_stale(session, RewardModelRow, submit_timeout, job_timeout)
