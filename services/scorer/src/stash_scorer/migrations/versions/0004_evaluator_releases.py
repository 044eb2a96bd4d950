"""The shared evaluator's releases, and which runs, jobs and scores belong to one of them.

A release is scored like a model (its runs, jobs and scores live in the same tables, under the model id
`evaluator-release-<number>`); `release_number` marks them, so personal reads leave them out and the
dispatcher can alternate personal and shared background batches. Every release keeps its scores: a
rollback shows the scores a release already published at once.

Revision ID: scorer_0004
Revises: scorer_0003
"""

import sqlalchemy as sa
from alembic import op

revision = "scorer_0004"
down_revision = "scorer_0003"
branch_labels = None
depends_on = None
_MARKED = ("scoring_runs", "scoring_jobs", "trace_scores", "action_scores")


def upgrade() -> None:
    op.create_table(
        "evaluator_releases",
        sa.Column("number", sa.Integer, primary_key=True),
        sa.Column("job_key", sa.String(500), nullable=False),
        sa.Column("artifact_key", sa.String(500), nullable=False),
        sa.Column("released_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("published_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("backfilled_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_evaluator_releases_released_at", "evaluator_releases", ["released_at"])
    op.add_column("scoring_models", sa.Column("training_job_key", sa.String(500), nullable=True))
    op.create_index("ix_scoring_models_training_job_key", "scoring_models", ["training_job_key"])
    for table in _MARKED:
        op.add_column(table, sa.Column("release_number", sa.Integer, nullable=True))
    op.create_index("ix_action_scores_release", "action_scores", ["owner_id", "trace_id", "release_number"])


def downgrade() -> None:
    op.drop_index("ix_action_scores_release", "action_scores")
    for table in _MARKED:
        op.drop_column(table, "release_number")
    op.drop_index("ix_scoring_models_training_job_key", "scoring_models")
    op.drop_column("scoring_models", "training_job_key")
    op.drop_index("ix_evaluator_releases_released_at", "evaluator_releases")
    op.drop_table("evaluator_releases")
