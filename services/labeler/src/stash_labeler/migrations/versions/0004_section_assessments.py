"""Cached fast-model assessments: section summaries and completion estimates, each with a generation lease.

The spec's migrations 0226 (section summaries) and 0230 (completion) in the labeler's own history.
A row is keyed by its evidence (hashes of the source steps and preceding context) and the
assessment version, so changed evidence or a new prompt makes a new row and an unchanged one is
read back. `status` is pending (a lease runs until `lease_until`), ready or failed.

Revision ID: labeler_0004
Revises: labeler_0003
"""

import sqlalchemy as sa
from alembic import op

revision = "labeler_0004"
down_revision = "labeler_0003"
branch_labels = None
depends_on = None


def _assessment_columns() -> list[sa.Column]:
    return [
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("owner_id", sa.String(64), nullable=False),
        sa.Column("trace_id", sa.String(36), nullable=False),
        sa.Column("source_hash", sa.String(64), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("lease_token", sa.String(36)),
        sa.Column("lease_until", sa.DateTime(timezone=True)),
        sa.Column("body", sa.JSON),
        sa.Column("error", sa.Text),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    ]


def upgrade() -> None:
    op.create_table(
        "section_summaries",
        *_assessment_columns(),
        sa.Column("first_step_id", sa.String(200), nullable=False),
        sa.Column("last_step_id", sa.String(200), nullable=False),
        sa.Column("context_hash", sa.String(64), nullable=False),
        sa.UniqueConstraint(
            "trace_id",
            "first_step_id",
            "last_step_id",
            "source_hash",
            "context_hash",
            "version",
            name="uq_section_summaries_key",
        ),
    )
    op.create_table(
        "trace_completions",
        *_assessment_columns(),
        sa.UniqueConstraint("trace_id", "source_hash", "version", name="uq_trace_completions_key"),
    )


def downgrade() -> None:
    op.drop_table("trace_completions")
    op.drop_table("section_summaries")
