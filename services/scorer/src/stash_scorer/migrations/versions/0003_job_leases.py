"""The lease of a running job: its replica renews it every few seconds, so a replica that died is noticed quickly.

Revision ID: scorer_0003
Revises: scorer_0002
"""

import sqlalchemy as sa
from alembic import op

revision = "scorer_0003"
down_revision = "scorer_0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("scoring_jobs", sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("scoring_jobs", "lease_until")
