"""Alembic environment of labeler's tables."""

from alembic import context

from stash_common.db import run_migrations
from stash_labeler.store import Base

run_migrations(context.config, Base.metadata)
