"""An index for the fair queue: each owner's oldest queued evaluations, without scanning everyone's.

Revision ID: labeler_0005
Revises: labeler_0004
"""

from alembic import op

revision = "labeler_0005"
down_revision = "labeler_0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_evaluations_status_owner_updated", "evaluations", ["status", "owner_id", "updated_at"])


def downgrade() -> None:
    op.drop_index("ix_evaluations_status_owner_updated", table_name="evaluations")
