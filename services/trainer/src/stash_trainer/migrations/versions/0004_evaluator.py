"""The shared evaluator's data: consents, candidate comparisons, reviews, reviewers, policy, benchmarks,
snapshots and the operator's actions.

Revision ID: trainer_0004
Revises: trainer_0003
"""

import sqlalchemy as sa
from alembic import op

revision = "trainer_0004"
down_revision = "trainer_0003"
branch_labels = None
depends_on = None


def _when(name: str, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "evaluator_consents",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("owner_id", sa.String(64), nullable=False),
        sa.Column("source_ids", sa.JSON),
        sa.Column("text_version", sa.String(50), nullable=False),
        sa.Column("granted_by", sa.String(64), nullable=False),
        _when("granted_at"),
        sa.Column("revoked_by", sa.String(64)),
        _when("revoked_at", nullable=True),
    )
    op.create_index("ix_evaluator_consents_owner", "evaluator_consents", ["owner_id", "granted_at"])
    op.create_table(
        "evaluator_comparisons",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("key", sa.String(64), nullable=False, unique=True),
        sa.Column("owner_id", sa.String(64), nullable=False),
        sa.Column("source_id", sa.String(64), nullable=False),
        sa.Column("source_format", sa.String(50), nullable=False),
        sa.Column("preference_source", sa.String(20), nullable=False),
        sa.Column("action_type", sa.String(20), nullable=False),
        sa.Column("author_ids", sa.JSON, nullable=False),
        sa.Column("trace_ids", sa.JSON, nullable=False),
        sa.Column("task_groups", sa.JSON, nullable=False),
        sa.Column("chosen", sa.JSON, nullable=False),
        sa.Column("rejected", sa.JSON, nullable=False),
        sa.Column("evidence", sa.JSON, nullable=False),
        _when("created_at"),
    )
    op.create_index("ix_evaluator_comparisons_owner", "evaluator_comparisons", ["owner_id"])
    op.create_table(
        "evaluator_reviews",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("comparison_id", sa.String(36), nullable=False),
        sa.Column("reviewer_id", sa.String(64), nullable=False),
        sa.Column("verdict", sa.String(20), nullable=False),
        sa.Column("note", sa.Text),
        _when("created_at"),
        sa.UniqueConstraint("comparison_id", "reviewer_id", name="uq_evaluator_reviews_once"),
    )
    op.create_index("ix_evaluator_reviews_comparison_id", "evaluator_reviews", ["comparison_id"])
    op.create_table(
        "evaluator_reviewers",
        sa.Column("user_id", sa.String(64), primary_key=True),
        sa.Column("named_by", sa.String(64), nullable=False),
        _when("named_at"),
    )
    op.create_table(
        "evaluator_policy",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("agreeing_reviews", sa.Integer, nullable=False),
    )
    op.create_table(
        "evaluator_benchmarks",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("task_groups", sa.JSON, nullable=False),
        sa.Column("trace_ids", sa.JSON, nullable=False),
        sa.Column("items", sa.JSON, nullable=False),
        sa.Column("slices", sa.JSON, nullable=False),
        sa.Column("size", sa.Integer, nullable=False),
        sa.Column("frozen_by", sa.String(64), nullable=False),
        _when("frozen_at"),
        sa.UniqueConstraint("name", "version", name="uq_evaluator_benchmarks_version"),
    )
    op.create_table(
        "evaluator_snapshots",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("object_key", sa.String(500), nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("size", sa.Integer, nullable=False),
        sa.Column("held_out", sa.Integer, nullable=False),
        sa.Column("taken_by", sa.String(64), nullable=False),
        _when("taken_at"),
    )
    op.create_table(
        "evaluator_operator_actions",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("actor_id", sa.String(64), nullable=False),
        sa.Column("action", sa.String(50), nullable=False),
        sa.Column("details", sa.JSON, nullable=False),
        _when("at"),
    )
    op.create_index("ix_evaluator_operator_actions_at", "evaluator_operator_actions", ["at"])


def downgrade() -> None:
    for table in (
        "evaluator_operator_actions",
        "evaluator_snapshots",
        "evaluator_benchmarks",
        "evaluator_policy",
        "evaluator_reviewers",
        "evaluator_reviews",
        "evaluator_comparisons",
        "evaluator_consents",
    ):
        op.drop_table(table)
