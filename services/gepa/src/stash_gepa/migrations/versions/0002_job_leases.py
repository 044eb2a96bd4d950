"""The lease of a running job: its replica renews it every few seconds, so a replica that died is noticed quickly.

Revision ID: gepa_0002
Revises: gepa_0001
"""

import sqlalchemy as sa
from alembic import op

revision = "gepa_0002"
down_revision = "gepa_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("gepa_runs", sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("gepa_runs", "lease_until")
