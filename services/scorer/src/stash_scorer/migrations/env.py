"""Alembic environment of scorer's tables."""

from alembic import context

from stash_common.db import run_migrations
from stash_scorer.store import Base

run_migrations(context.config, Base.metadata)
