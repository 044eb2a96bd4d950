"""The lease of a running job: its replica renews it every few seconds, so a replica that died is noticed quickly.

Revision ID: trainer_0002
Revises: trainer_0001
"""

import sqlalchemy as sa
from alembic import op

revision = "trainer_0002"
down_revision = "trainer_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("reward_models", sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("reward_models", "lease_until")
