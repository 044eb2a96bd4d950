"""Which launch recorded a model's learning report, so a retry can keep the last one visible and say so.

Revision ID: trainer_0003
Revises: trainer_0002
"""

import sqlalchemy as sa
from alembic import op

revision = "trainer_0003"
down_revision = "trainer_0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("reward_models", sa.Column("feedback_job_id", sa.String(36), nullable=True))
    # Until now a retry cleared the report, so every recorded report is the current launch's.
    op.execute("UPDATE reward_models SET feedback_job_id = job_id WHERE feedback IS NOT NULL")


def downgrade() -> None:
    op.drop_column("reward_models", "feedback_job_id")
