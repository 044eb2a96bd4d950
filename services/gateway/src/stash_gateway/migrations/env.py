"""Alembic environment of the gateway's tables."""

from alembic import context

from stash_common.db import run_migrations
from stash_gateway.store import Base

run_migrations(context.config, Base.metadata)
