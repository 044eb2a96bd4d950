"""Each owner's change marker, which the gateway compares with the marker of its cached SQL tables.

Revision ID: ingest_0004
Revises: ingest_0003
"""

import sqlalchemy as sa
from alembic import op

revision = "ingest_0004"
down_revision = "ingest_0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ingest_owner_versions",
        sa.Column("owner_id", sa.String(64), primary_key=True),
        sa.Column("version", sa.String(36), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("ingest_owner_versions")
