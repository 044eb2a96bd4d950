"""Alembic environment of trainer's tables."""

from alembic import context

from stash_common.db import run_migrations
from stash_trainer.evaluator import store as evaluator_store  # noqa: F401  (its tables join Base's metadata)
from stash_trainer.store import Base

run_migrations(context.config, Base.metadata)
