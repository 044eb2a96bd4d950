"""The frozen evaluation split of an input version 3 model: its held-out task groups, reused by retries.

Revision ID: trainer_0005
Revises: trainer_0004
"""

import sqlalchemy as sa
from alembic import op

revision = "trainer_0005"
down_revision = "trainer_0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("reward_models", sa.Column("eval_task_groups", sa.JSON, nullable=True))


def downgrade() -> None:
    op.drop_column("reward_models", "eval_task_groups")
