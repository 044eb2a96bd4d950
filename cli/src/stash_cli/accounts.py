"""Users and API keys from the command line, written straight to the gateway's tables."""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from stash_common.db import make_engine, make_sessions, transaction, upgrade
from stash_common.settings import load
from stash_gateway.accounts import ApiKey, User
from stash_gateway.settings import GatewaySettings
from stash_gateway.store import MIGRATIONS_DIR, create_key, create_user, find_user, set_reward_models_enabled


def _sessions() -> sessionmaker[Session]:
    settings = load(GatewaySettings)
    upgrade("gateway", MIGRATIONS_DIR, settings.database_url)
    return make_sessions(make_engine(settings.database_url))


def create_user_with_key(name: str) -> tuple[User, str]:
    """A new user and the secret of its first full-access key."""
    with transaction(_sessions()) as session:
        user = create_user(session, name)
        _key, secret = create_key(session, user.id, "default", read_only=False)
    return user, secret


def create_key_for(user: str, name: str, read_only: bool) -> tuple[ApiKey, str]:
    """A new key for the user with this name or id, and its secret."""
    with transaction(_sessions()) as session:
        return create_key(session, find_user(session, user).id, name, read_only)


def switch_reward_models(user: str, enabled: bool) -> User:
    """Enable or disable the reward-model API for the user with this name or id."""
    with transaction(_sessions()) as session:
        return set_reward_models_enabled(session, user, enabled)
