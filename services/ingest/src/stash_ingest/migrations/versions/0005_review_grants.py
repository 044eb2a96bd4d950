"""Review grants: an owner shares all their traces, or chosen sources, with a reviewer.

Revision ID: ingest_0005
Revises: ingest_0004
"""

import sqlalchemy as sa
from alembic import op

revision = "ingest_0005"
down_revision = "ingest_0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "review_grants",
        sa.Column("owner_id", sa.String(64), primary_key=True),
        sa.Column("reviewer_id", sa.String(64), primary_key=True),
        sa.Column("all_sources", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_review_grants_reviewer", "review_grants", ["reviewer_id"])
    op.create_table(
        "review_grant_sources",
        sa.Column("owner_id", sa.String(64), primary_key=True),
        sa.Column("reviewer_id", sa.String(64), primary_key=True),
        sa.Column("source_id", sa.String(200), primary_key=True),
        sa.ForeignKeyConstraint(
            ["owner_id", "reviewer_id"],
            ["review_grants.owner_id", "review_grants.reviewer_id"],
            ondelete="CASCADE",
        ),
    )


def downgrade() -> None:
    op.drop_table("review_grant_sources")
    op.drop_index("ix_review_grants_reviewer", table_name="review_grants")
    op.drop_table("review_grants")
