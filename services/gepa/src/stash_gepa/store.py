"""The table the gepa service owns: GEPA runs with their settings, lifecycle and result.

A run moves queued → running → succeeded | failed (`stash_common.jobs.lifecycle`): only a queued
run can be claimed, each claim gets a new `job_id`, and a failed run can be queued again with its
id and settings. `result` holds the worker's validated result (the best skill, the seed, every
candidate, the examples that failed) once the run succeeded.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import JSON, Index, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from stash_common.jobs import lifecycle as job_lifecycle
from stash_common.jobs.lifecycle import JobColumns

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
NOUN = "GEPA run"


class Base(DeclarativeBase):
    """Metadata of the tables the gepa service owns."""

    type_annotation_map = {dict[str, Any]: JSON}


class GepaRunRow(JobColumns, Base):
    """One GEPA run and where it stands."""

    __tablename__ = "gepa_runs"
    __table_args__ = (
        Index("ix_gepa_runs_owner_created", "owner_id", "created_at"),
        Index("ix_gepa_runs_status", "status"),
    )

    reward_model_id: Mapped[str] = mapped_column(String(36))
    task_model: Mapped[str] = mapped_column(String(500))
    task_api_base: Mapped[str | None] = mapped_column(String(2000))
    reflection_model: Mapped[str] = mapped_column(String(500))
    max_metric_calls: Mapped[int] = mapped_column(Integer)
    budget_warning: Mapped[str | None] = mapped_column(Text)
    train_examples: Mapped[int | None] = mapped_column(Integer)
    validation_examples: Mapped[int | None] = mapped_column(Integer)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON)


def find_run(session: Session, owner_id: str, run_id: str) -> GepaRunRow:
    """The owner's run; another owner's is simply not found."""
    return job_lifecycle.find(session, GepaRunRow, owner_id, run_id, NOUN)


def list_runs(session: Session, owner_id: str) -> list[GepaRunRow]:
    """The owner's runs, newest first."""
    return job_lifecycle.owned(session, GepaRunRow, owner_id)


def queued_ids(session: Session, limit: int) -> list[str]:
    """The oldest queued runs."""
    return job_lifecycle.queued_ids(session, GepaRunRow, limit)


def claim(session: Session, run_id: str) -> str | None:
    """Move a queued run to running under a new job id; None when another claimer won."""
    return job_lifecycle.claim(session, GepaRunRow, run_id)


def delete_run(session: Session, owner_id: str, run_id: str) -> None:
    """Delete a run that is not queued or running."""
    job_lifecycle.delete(session, GepaRunRow, owner_id, run_id, NOUN)


def retry(session: Session, owner_id: str, run_id: str) -> GepaRunRow:
    """Queue a failed run again, keeping its id and settings."""
    row = job_lifecycle.requeue(session, GepaRunRow, owner_id, run_id, NOUN)
    row.result, row.budget_warning, row.train_examples, row.validation_examples = None, None, None, None
    return row


def running_job(session: Session, run_id: str, job_id: str) -> GepaRunRow:
    """The running run of this launch; a superseded or finished launch is refused."""
    return job_lifecycle.running_job(session, GepaRunRow, run_id, job_id, NOUN)


def completing_job(session: Session, run_id: str, job_id: str) -> GepaRunRow | None:
    """The running run this launch's completion settles; None when this launch settled it already."""
    return job_lifecycle.completing_job(session, GepaRunRow, run_id, job_id, NOUN)


def fail_stale(session: Session, submit_timeout: timedelta, job_timeout: timedelta) -> list[str]:
    """Fail interrupted submissions and overdue jobs; returns their ids."""
    return job_lifecycle.fail_stale(session, GepaRunRow, submit_timeout, job_timeout)
