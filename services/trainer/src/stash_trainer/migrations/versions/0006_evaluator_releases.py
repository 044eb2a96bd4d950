"""The shared evaluator's training policy, candidates, numbered releases and their publications to the scorer.

Revision ID: trainer_0006
Revises: trainer_0005
"""

import sqlalchemy as sa
from alembic import op

revision = "trainer_0006"
down_revision = "trainer_0005"
branch_labels = None
depends_on = None


def _when(name: str, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "evaluator_training_policy",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("policy", sa.JSON, nullable=False),
        sa.Column("set_by", sa.String(64), nullable=False),
        _when("set_at"),
    )
    op.create_table(
        "evaluator_candidates",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("snapshot_id", sa.String(36), nullable=False),
        sa.Column("policy", sa.JSON, nullable=False),
        sa.Column("benchmarks", sa.JSON, nullable=False),
        sa.Column("report", sa.JSON),
        sa.Column("gate", sa.JSON),
        sa.Column("decision", sa.String(20)),
        sa.Column("reason", sa.Text),
        sa.Column("created_by", sa.String(64), nullable=False),
        _when("created_at"),
    )
    op.create_index("ix_evaluator_candidates_created", "evaluator_candidates", ["created_at"])
    op.create_table(
        "evaluator_release_decisions",
        sa.Column("number", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("candidate_id", sa.String(36), nullable=False, unique=True),
        sa.Column("job_key", sa.String(500), nullable=False),
        sa.Column("notes", sa.Text, nullable=False),
        sa.Column("released_by", sa.String(64), nullable=False),
        _when("released_at"),
    )
    op.create_table(
        "evaluator_publications",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("number", sa.Integer, nullable=False),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("actor_id", sa.String(64), nullable=False),
        _when("published_at"),
        _when("acknowledged_at", nullable=True),
    )
    op.create_index("ix_evaluator_publications_at", "evaluator_publications", ["published_at"])


def downgrade() -> None:
    op.drop_table("evaluator_publications")
    op.drop_table("evaluator_release_decisions")
    op.drop_table("evaluator_candidates")
    op.drop_table("evaluator_training_policy")
