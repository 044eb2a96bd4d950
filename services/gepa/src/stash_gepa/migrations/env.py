"""Alembic environment of the gepa service's tables."""

from alembic import context

from stash_common.db import run_migrations
from stash_gepa.store import Base

run_migrations(context.config, Base.metadata)
