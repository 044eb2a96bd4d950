"""Process findings of stored traces, live trajectory windows, and the course-correction ledger.

Revision ID: labeler_0002
Revises: labeler_0001
"""

import sqlalchemy as sa
from alembic import op

revision = "labeler_0002"
down_revision = "labeler_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "process_findings",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("owner_id", sa.String(64), nullable=False),
        sa.Column("trace_id", sa.String(36), nullable=False),
        sa.Column("revision", sa.Integer, nullable=False),
        sa.Column("pattern", sa.String(40), nullable=False),
        sa.Column("taxonomy", sa.String(40), nullable=False),
        sa.Column("severity", sa.Integer, nullable=False),
        sa.Column("source", sa.String(10), nullable=False),
        sa.Column("confidence", sa.Float),
        sa.Column("first_step_id", sa.String(36), nullable=False),
        sa.Column("last_step_id", sa.String(36), nullable=False),
        sa.Column("first_step_index", sa.Integer, nullable=False),
        sa.Column("last_step_index", sa.Integer, nullable=False),
        sa.Column("suggestion", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_process_findings_owner_pattern", "process_findings", ["owner_id", "pattern"])
    op.create_index("ix_process_findings_trace", "process_findings", ["trace_id"])
    op.create_table(
        "trajectory_events",
        sa.Column("owner_id", sa.String(64), primary_key=True),
        sa.Column("task_id", sa.String(200), primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True),
        sa.Column("event", sa.JSON, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "course_corrections",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("owner_id", sa.String(64), nullable=False),
        sa.Column("task_id", sa.String(200), nullable=False),
        sa.Column("taxonomy", sa.String(40), nullable=False),
        sa.Column("pattern", sa.String(40), nullable=False),
        sa.Column("fingerprint", sa.String(100), nullable=False),
        sa.Column("suggestion", sa.String(500), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("owner_id", "task_id", "fingerprint", name="uq_course_corrections_task_fingerprint"),
    )


def downgrade() -> None:
    op.drop_table("course_corrections")
    op.drop_table("trajectory_events")
    op.drop_index("ix_process_findings_trace", "process_findings")
    op.drop_index("ix_process_findings_owner_pattern", "process_findings")
    op.drop_table("process_findings")
