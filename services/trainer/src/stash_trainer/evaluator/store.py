"""The shared evaluator's tables (in the trainer's database, migration `trainer_0004`).

Every table is append-mostly: a consent is closed (revoked) rather than deleted, a review is never
changed, a benchmark version is never changed, and every operator action is a row of its own.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from stash_common.db import UtcDateTime
from stash_trainer.store import Base


class ConsentRow(Base):
    """One consent an account gave: to all its traces (`source_ids` None) or to chosen sources; open until revoked."""

    __tablename__ = "evaluator_consents"
    __table_args__ = (Index("ix_evaluator_consents_owner", "owner_id", "granted_at"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    owner_id: Mapped[str] = mapped_column(String(64))
    source_ids: Mapped[list[Any] | None] = mapped_column(JSON)
    text_version: Mapped[str] = mapped_column(String(50))
    granted_by: Mapped[str] = mapped_column(String(64))
    granted_at: Mapped[datetime] = mapped_column(UtcDateTime)
    revoked_by: Mapped[str | None] = mapped_column(String(64))
    revoked_at: Mapped[datetime | None] = mapped_column(UtcDateTime)


class ComparisonRow(Base):
    """A candidate comparison of two actions, rendered as input version 2, with its provenance and authors."""

    __tablename__ = "evaluator_comparisons"
    __table_args__ = (Index("ix_evaluator_comparisons_owner", "owner_id"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    # What identifies the comparison across rebuilds: its source and both sides' trace and step ids.
    key: Mapped[str] = mapped_column(String(64), unique=True)
    owner_id: Mapped[str] = mapped_column(String(64))
    source_id: Mapped[str] = mapped_column(String(64))
    source_format: Mapped[str] = mapped_column(String(50))
    preference_source: Mapped[str] = mapped_column(String(20))
    action_type: Mapped[str] = mapped_column(String(20))
    author_ids: Mapped[list[Any]] = mapped_column(JSON)
    trace_ids: Mapped[list[Any]] = mapped_column(JSON)
    task_groups: Mapped[list[Any]] = mapped_column(JSON)
    chosen: Mapped[dict[str, Any]] = mapped_column(JSON)
    rejected: Mapped[dict[str, Any]] = mapped_column(JSON)
    evidence: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)


class ReviewRow(Base):
    """One reviewer's verdict on one comparison, relative to the candidate's chosen side."""

    __tablename__ = "evaluator_reviews"
    __table_args__ = (UniqueConstraint("comparison_id", "reviewer_id", name="uq_evaluator_reviews_once"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    comparison_id: Mapped[str] = mapped_column(String(36), index=True)
    reviewer_id: Mapped[str] = mapped_column(String(64))
    # confirms | reverses | tie | invalid
    verdict: Mapped[str] = mapped_column(String(20))
    note: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)


class ReviewerRow(Base):
    """An account the operator named an evaluator reviewer."""

    __tablename__ = "evaluator_reviewers"

    user_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    named_by: Mapped[str] = mapped_column(String(64))
    named_at: Mapped[datetime] = mapped_column(UtcDateTime)


class PolicyRow(Base):
    """The review policy (one row, id 1): how many agreeing reviews admit a comparison."""

    __tablename__ = "evaluator_policy"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    agreeing_reviews: Mapped[int] = mapped_column(Integer)


class BenchmarkRow(Base):
    """One frozen, immutable version of a benchmark: its comparisons, content hash, slices and held-out groups."""

    __tablename__ = "evaluator_benchmarks"
    __table_args__ = (UniqueConstraint("name", "version", name="uq_evaluator_benchmarks_version"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    name: Mapped[str] = mapped_column(String(100))
    version: Mapped[int] = mapped_column(Integer)
    content_hash: Mapped[str] = mapped_column(String(64))
    task_groups: Mapped[list[Any]] = mapped_column(JSON)
    trace_ids: Mapped[list[Any]] = mapped_column(JSON)
    items: Mapped[list[Any]] = mapped_column(JSON)
    slices: Mapped[dict[str, Any]] = mapped_column(JSON)
    size: Mapped[int] = mapped_column(Integer)
    frozen_by: Mapped[str] = mapped_column(String(64))
    frozen_at: Mapped[datetime] = mapped_column(UtcDateTime)


class SnapshotRow(Base):
    """A corpus snapshot for training, stored in object storage at `object_key`."""

    __tablename__ = "evaluator_snapshots"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    object_key: Mapped[str] = mapped_column(String(500))
    content_hash: Mapped[str] = mapped_column(String(64))
    size: Mapped[int] = mapped_column(Integer)
    held_out: Mapped[int] = mapped_column(Integer)
    taken_by: Mapped[str] = mapped_column(String(64))
    taken_at: Mapped[datetime] = mapped_column(UtcDateTime)


class OperatorActionRow(Base):
    """Something an operator did, with who and when."""

    __tablename__ = "evaluator_operator_actions"
    __table_args__ = (Index("ix_evaluator_operator_actions_at", "at"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    actor_id: Mapped[str] = mapped_column(String(64))
    action: Mapped[str] = mapped_column(String(50))
    details: Mapped[dict[str, Any]] = mapped_column(JSON)
    at: Mapped[datetime] = mapped_column(UtcDateTime)


class TrainingPolicyRow(Base):
    """The training policy (one row, id 1): what a candidate trains with, when, and the release gate."""

    __tablename__ = "evaluator_training_policy"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    policy: Mapped[dict[str, Any]] = mapped_column(JSON)
    set_by: Mapped[str] = mapped_column(String(64))
    set_at: Mapped[datetime] = mapped_column(UtcDateTime)


class CandidateRow(Base):
    """A candidate evaluator: the reward model row its training job trains (same id), its recorded inputs,
    and once evaluated its benchmark report and the gate's decision."""

    __tablename__ = "evaluator_candidates"
    __table_args__ = (Index("ix_evaluator_candidates_created", "created_at"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    snapshot_id: Mapped[str] = mapped_column(String(36))
    policy: Mapped[dict[str, Any]] = mapped_column(JSON)
    benchmarks: Mapped[list[Any]] = mapped_column(JSON)
    report: Mapped[list[Any] | None] = mapped_column(JSON)
    gate: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # None while training; then refused | awaiting_approval | released (a failed training is the model's status).
    decision: Mapped[str | None] = mapped_column(String(20))
    reason: Mapped[str | None] = mapped_column(Text)
    created_by: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)


class ReleaseRow(Base):
    """A numbered release of a candidate."""

    __tablename__ = "evaluator_release_decisions"

    number: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    candidate_id: Mapped[str] = mapped_column(String(36), unique=True)
    job_key: Mapped[str] = mapped_column(String(500))
    notes: Mapped[str] = mapped_column(Text)
    released_by: Mapped[str] = mapped_column(String(64))
    released_at: Mapped[datetime] = mapped_column(UtcDateTime)


class PublicationRow(Base):
    """One publication of a release to the scorer (a release, or a rollback to it), until the scorer acknowledged
    it; the latest publication's release is the current one."""

    __tablename__ = "evaluator_publications"
    __table_args__ = (Index("ix_evaluator_publications_at", "published_at"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    number: Mapped[int] = mapped_column(Integer)
    # release | rollback
    kind: Mapped[str] = mapped_column(String(20))
    actor_id: Mapped[str] = mapped_column(String(64))
    published_at: Mapped[datetime] = mapped_column(UtcDateTime)
    acknowledged_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
