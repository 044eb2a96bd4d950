"""Raw OTLP spans per owner, trace and span, for rebuilding traces as their spans arrive.

Revision ID: ingest_0002
Revises: ingest_0001
"""

import sqlalchemy as sa
from alembic import op

revision = "ingest_0002"
down_revision = "ingest_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "otel_spans",
        sa.Column("trace_id", sa.String(32), primary_key=True),
        sa.Column("span_id", sa.String(16), primary_key=True),
        sa.Column("owner_id", sa.String(64), primary_key=True),
        sa.Column("body", sa.JSON, nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("otel_spans")
