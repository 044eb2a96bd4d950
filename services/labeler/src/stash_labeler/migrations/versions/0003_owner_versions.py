"""Each owner's change marker, which the gateway compares with the marker of its cached SQL tables.

Revision ID: labeler_0003
Revises: labeler_0002
"""

import sqlalchemy as sa
from alembic import op

revision = "labeler_0003"
down_revision = "labeler_0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "labeler_owner_versions",
        sa.Column("owner_id", sa.String(64), primary_key=True),
        sa.Column("version", sa.String(36), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("labeler_owner_versions")
