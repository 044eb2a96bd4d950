"""Each owner's change marker, which the gateway compares with the marker of its cached SQL tables.

Revision ID: scorer_0002
Revises: scorer_0001
"""

import sqlalchemy as sa
from alembic import op

revision = "scorer_0002"
down_revision = "scorer_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "scorer_owner_versions",
        sa.Column("owner_id", sa.String(64), primary_key=True),
        sa.Column("version", sa.String(36), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("scorer_owner_versions")
