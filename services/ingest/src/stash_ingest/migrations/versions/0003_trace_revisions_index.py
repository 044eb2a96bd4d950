"""Index traces by change time, for the labeler's sweep over changed revisions.

Revision ID: ingest_0003
Revises: ingest_0002
"""

from alembic import op

revision = "ingest_0003"
down_revision = "ingest_0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_traces_updated_id", "traces", ["updated_at", "id"])


def downgrade() -> None:
    op.drop_index("ix_traces_updated_id", "traces")
