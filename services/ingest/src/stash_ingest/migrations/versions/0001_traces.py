"""Traces, steps, spans, annotations and trace-source aliases.

Revision ID: ingest_0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "ingest_0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "traces",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("owner_id", sa.String(64), nullable=False),
        sa.Column("external_id", sa.String(500), nullable=True),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("source_format", sa.String(40), nullable=False),
        sa.Column("source_id", sa.String(200), nullable=False),
        sa.Column("explicit_source_id", sa.Boolean, nullable=False),
        sa.Column("metadata", sa.JSON, nullable=False),
        sa.Column("revision", sa.Integer, nullable=False),
        sa.Column("step_count", sa.Integer, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("external_id", "owner_id", name="uq_traces_external_id_owner"),
    )
    op.create_index("ix_traces_owner_created", "traces", ["owner_id", "created_at"])
    op.create_table(
        "steps",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("trace_id", sa.String(36), sa.ForeignKey("traces.id", ondelete="CASCADE"), nullable=False),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("tool_name", sa.Text, nullable=True),
        sa.Column("tool_input", sa.JSON, nullable=True),
        sa.Column("tool_call_id", sa.Text, nullable=True),
        sa.Column("metadata", sa.JSON, nullable=False),
        sa.UniqueConstraint("trace_id", "position", name="uq_steps_trace_position"),
    )
    op.create_table(
        "spans",
        sa.Column("trace_id", sa.String(36), sa.ForeignKey("traces.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("span_id", sa.String(64), primary_key=True),
        sa.Column("parent_id", sa.String(64), nullable=True),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("kind", sa.String(40), nullable=True),
        sa.Column("start_ns", sa.BigInteger, nullable=False),
        sa.Column("end_ns", sa.BigInteger, nullable=False),
        sa.Column("input", sa.JSON, nullable=True),
        sa.Column("output", sa.JSON, nullable=True),
        sa.Column("step_indices", sa.JSON, nullable=False),
    )
    op.create_table(
        "annotations",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("trace_id", sa.String(36), sa.ForeignKey("traces.id", ondelete="CASCADE"), nullable=False),
        sa.Column("step_id", sa.String(36), sa.ForeignKey("steps.id", ondelete="CASCADE"), nullable=True),
        sa.Column("owner_id", sa.String(64), nullable=False),
        sa.Column("author_id", sa.String(64), nullable=False),
        sa.Column("author_name", sa.String(200), nullable=False),
        sa.Column("rating", sa.Integer, nullable=True),
        sa.Column("comment", sa.Text, nullable=True),
        sa.Column("quote", sa.JSON, nullable=True),
        sa.Column("label_error", sa.Boolean, nullable=False),
        sa.Column("label_error_note", sa.Text, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_annotations_trace_id", "annotations", ["trace_id"])
    op.create_index("ix_annotations_step_id", "annotations", ["step_id"])
    op.create_table(
        "trace_sources",
        sa.Column("owner_id", sa.String(64), primary_key=True),
        sa.Column("source_id", sa.String(200), primary_key=True),
        sa.Column("name", sa.String(120), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("trace_sources")
    op.drop_index("ix_annotations_step_id", table_name="annotations")
    op.drop_index("ix_annotations_trace_id", table_name="annotations")
    op.drop_table("annotations")
    op.drop_table("spans")
    op.drop_table("steps")
    op.drop_index("ix_traces_owner_created", table_name="traces")
    op.drop_table("traces")
