"""Reward models and the training pairs each one trained on.

Revision ID: trainer_0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "trainer_0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "reward_models",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("owner_id", sa.String(64), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("base_model", sa.String(500), nullable=False),
        sa.Column("compute", sa.String(20), nullable=False),
        sa.Column("epochs", sa.Integer, nullable=False),
        sa.Column("max_pairs", sa.Integer, nullable=False),
        sa.Column("training_config", sa.JSON, nullable=False),
        sa.Column("trace_ids", sa.JSON, nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("job_id", sa.String(36)),
        sa.Column("num_pairs", sa.Integer),
        sa.Column("metrics", sa.JSON),
        sa.Column("progress", sa.JSON, nullable=False),
        sa.Column("feedback", sa.JSON),
        sa.Column("error", sa.Text),
        sa.Column("artifact_key", sa.String(500)),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True)),
        sa.Column("started_at", sa.DateTime(timezone=True)),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
    )
    op.create_index("ix_reward_models_owner_created", "reward_models", ["owner_id", "created_at"])
    op.create_index("ix_reward_models_status", "reward_models", ["status"])
    op.create_table(
        "training_pairs",
        sa.Column("reward_model_id", sa.String(36), primary_key=True),
        sa.Column("position", sa.Integer, primary_key=True),
        sa.Column("owner_id", sa.String(64), nullable=False),
        sa.Column("pair", sa.JSON, nullable=False),
    )
    op.create_index("ix_training_pairs_owner_id", "training_pairs", ["owner_id"])


def downgrade() -> None:
    op.drop_index("ix_training_pairs_owner_id", "training_pairs")
    op.drop_table("training_pairs")
    op.drop_index("ix_reward_models_status", "reward_models")
    op.drop_index("ix_reward_models_owner_created", "reward_models")
    op.drop_table("reward_models")
