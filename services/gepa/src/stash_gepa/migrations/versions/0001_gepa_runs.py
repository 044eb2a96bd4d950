"""GEPA runs: their settings, lifecycle and result.

Revision ID: gepa_0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "gepa_0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "gepa_runs",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("owner_id", sa.String(64), nullable=False),
        sa.Column("reward_model_id", sa.String(36), nullable=False),
        sa.Column("task_model", sa.String(500), nullable=False),
        sa.Column("task_api_base", sa.String(2000)),
        sa.Column("reflection_model", sa.String(500), nullable=False),
        sa.Column("max_metric_calls", sa.Integer, nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("job_id", sa.String(36)),
        sa.Column("progress", sa.JSON, nullable=False),
        sa.Column("error", sa.Text),
        sa.Column("budget_warning", sa.Text),
        sa.Column("train_examples", sa.Integer),
        sa.Column("validation_examples", sa.Integer),
        sa.Column("result", sa.JSON),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True)),
        sa.Column("started_at", sa.DateTime(timezone=True)),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
    )
    op.create_index("ix_gepa_runs_owner_created", "gepa_runs", ["owner_id", "created_at"])
    op.create_index("ix_gepa_runs_status", "gepa_runs", ["status"])


def downgrade() -> None:
    op.drop_table("gepa_runs")
