"""Scoring runs and jobs, trace and action scores, ready models, and the background sweep's state.

Revision ID: scorer_0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "scorer_0001"
down_revision = None
branch_labels = None
depends_on = None

ACTIVE_RUN = sa.text("status IN ('queued', 'running')")
RUNNING_JOB = sa.text("status = 'running'")


def _timestamp(name: str, nullable: bool = False) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "scoring_models",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("owner_id", sa.String(64), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("artifact_key", sa.String(500), nullable=False),
        sa.Column("scores_actions", sa.Boolean, nullable=False),
        _timestamp("backfilled_at", nullable=True),
        _timestamp("ready_at"),
    )
    op.create_index("ix_scoring_models_owner", "scoring_models", ["owner_id"])
    op.create_table(
        "scoring_runs",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("owner_id", sa.String(64), nullable=False),
        sa.Column("trace_id", sa.String(36), nullable=False),
        sa.Column("trace_revision", sa.BigInteger, nullable=False),
        sa.Column("reward_model_id", sa.String(36), nullable=False),
        sa.Column("reward_model_name", sa.String(200), nullable=False),
        sa.Column("artifact_key", sa.String(500), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("explicit", sa.Boolean, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("permanent", sa.Boolean, nullable=False),
        sa.Column("error", sa.Text),
        sa.Column("job_id", sa.String(36)),
        _timestamp("created_at"),
        _timestamp("started_at", nullable=True),
        _timestamp("finished_at", nullable=True),
    )
    op.create_index(
        "uq_scoring_runs_active",
        "scoring_runs",
        ["trace_id", "reward_model_id", "trace_revision"],
        unique=True,
        postgresql_where=ACTIVE_RUN,
        sqlite_where=ACTIVE_RUN,
    )
    op.create_index("ix_scoring_runs_claim", "scoring_runs", ["status", "reward_model_id", "explicit", "created_at"])
    op.create_index("ix_scoring_runs_trace", "scoring_runs", ["owner_id", "trace_id", "created_at"])
    op.create_index("ix_scoring_runs_job", "scoring_runs", ["job_id"])
    op.create_table(
        "scoring_jobs",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("owner_id", sa.String(64), nullable=False),
        sa.Column("reward_model_id", sa.String(36), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("slot", sa.Integer, nullable=False),
        sa.Column("run_count", sa.Integer, nullable=False),
        sa.Column("exit_code", sa.Integer),
        sa.Column("error", sa.Text),
        _timestamp("created_at"),
        _timestamp("finished_at", nullable=True),
    )
    op.create_index(
        "uq_scoring_jobs_running_slot",
        "scoring_jobs",
        ["slot"],
        unique=True,
        postgresql_where=RUNNING_JOB,
        sqlite_where=RUNNING_JOB,
    )
    op.create_table(
        "trace_scores",
        sa.Column("reward_model_id", sa.String(36), primary_key=True),
        sa.Column("trace_id", sa.String(36), primary_key=True),
        sa.Column("owner_id", sa.String(64), nullable=False),
        sa.Column("reward_model_name", sa.String(200), nullable=False),
        sa.Column("trace_revision", sa.BigInteger, nullable=False),
        sa.Column("score", sa.Float, nullable=False),
        sa.Column("scoring_run_id", sa.String(36), nullable=False),
        _timestamp("created_at"),
    )
    op.create_index("ix_trace_scores_owner_trace", "trace_scores", ["owner_id", "trace_id"])
    op.create_table(
        "action_scores",
        sa.Column("reward_model_id", sa.String(36), primary_key=True),
        sa.Column("step_id", sa.String(64), primary_key=True),
        sa.Column("owner_id", sa.String(64), nullable=False),
        sa.Column("trace_id", sa.String(36), nullable=False),
        sa.Column("step_index", sa.Integer, nullable=False),
        sa.Column("reward_model_name", sa.String(200), nullable=False),
        sa.Column("trace_revision", sa.BigInteger, nullable=False),
        sa.Column("score", sa.Float, nullable=False),
        sa.Column("credit", sa.Float, nullable=False),
        sa.Column("scoring_run_id", sa.String(36), nullable=False),
        _timestamp("created_at"),
    )
    op.create_index("ix_action_scores_trace", "action_scores", ["trace_id", "reward_model_id"])
    op.create_table(
        "scoring_pending_changes",
        sa.Column("trace_id", sa.String(36), primary_key=True),
        sa.Column("owner_id", sa.String(64), nullable=False),
        sa.Column("revision", sa.BigInteger, nullable=False),
        _timestamp("seen_at"),
        _timestamp("first_seen_at"),
    )
    op.create_index("ix_scoring_pending_changes_owner", "scoring_pending_changes", ["owner_id", "seen_at"])
    op.create_table(
        "scoring_sweep_cursors",
        sa.Column("name", sa.String(100), primary_key=True),
        sa.Column("cursor", sa.Text, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("scoring_sweep_cursors")
    op.drop_index("ix_scoring_pending_changes_owner", "scoring_pending_changes")
    op.drop_table("scoring_pending_changes")
    op.drop_index("ix_action_scores_trace", "action_scores")
    op.drop_table("action_scores")
    op.drop_index("ix_trace_scores_owner_trace", "trace_scores")
    op.drop_table("trace_scores")
    op.drop_index("uq_scoring_jobs_running_slot", "scoring_jobs")
    op.drop_table("scoring_jobs")
    for index in ("ix_scoring_runs_job", "ix_scoring_runs_trace", "ix_scoring_runs_claim", "uq_scoring_runs_active"):
        op.drop_index(index, "scoring_runs")
    op.drop_table("scoring_runs")
    op.drop_index("ix_scoring_models_owner", "scoring_models")
    op.drop_table("scoring_models")
