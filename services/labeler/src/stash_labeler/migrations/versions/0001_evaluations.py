"""Kept chunk labels, evaluations per trace revision and the sweep cursor.

Revision ID: labeler_0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "labeler_0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "chunk_labels",
        sa.Column("trace_id", sa.String(36), primary_key=True),
        sa.Column("chunk_id", sa.String(20), primary_key=True),
        sa.Column("owner_id", sa.String(64), nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("label", sa.JSON, nullable=False),
        sa.Column("source", sa.String(20), nullable=False),
        sa.Column("model", sa.String(200)),
        sa.Column("distribution", sa.JSON),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "evaluations",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("owner_id", sa.String(64), nullable=False),
        sa.Column("trace_id", sa.String(36), nullable=False),
        sa.Column("revision", sa.Integer, nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("error", sa.Text),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("labeler", sa.String(20)),
        sa.Column("trace_score", sa.Float),
        sa.Column("outcome", sa.String(40)),
        sa.Column("body", sa.JSON),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
        sa.UniqueConstraint("trace_id", "revision", name="uq_evaluations_trace_revision"),
    )
    op.create_index("ix_evaluations_status_updated", "evaluations", ["status", "updated_at"])
    op.create_table(
        "sweep_cursors",
        sa.Column("name", sa.String(40), primary_key=True),
        sa.Column("cursor", sa.Text, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("sweep_cursors")
    op.drop_index("ix_evaluations_status_updated", "evaluations")
    op.drop_table("evaluations")
    op.drop_table("chunk_labels")
