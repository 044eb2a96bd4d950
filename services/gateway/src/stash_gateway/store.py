"""The gateway's tables (users, API keys) and the queries on them."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from pathlib import Path

from sqlalchemy import Boolean, DateTime, ForeignKey, String, select
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from stash_common.db import new_id, utc_now
from stash_common.errors import AlreadyExists, InvalidArgument, NotFound
from stash_gateway.accounts import ApiKey, Principal, User, digest, new_secret

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


class Base(DeclarativeBase):
    """Metadata of the tables the gateway owns."""


class UserRow(Base):
    """A user; `reward_models_enabled` gates the reward-model API per account (spec: Rollout)."""

    __tablename__ = "users"

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    reward_models_enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)


class ApiKeyRow(Base):
    """An API key, stored as the digest of the secret the user was shown once."""

    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    key_digest: Mapped[str] = mapped_column(String(64), unique=True)
    read_only: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


def create_user(session: Session, name: str) -> User:
    """Add a user with a unique, non-empty name."""
    name = name.strip()
    if not name or len(name) > 200:
        raise InvalidArgument("name", "a user name needs 1 to 200 characters")
    if session.scalar(select(UserRow).where(UserRow.name == name)) is not None:
        raise AlreadyExists(f"a user named {name!r} already exists; pick another name")
    row = UserRow(name=name, created_at=utc_now())
    session.add(row)
    session.flush()
    return _user(row)


def find_user(session: Session, name_or_id: str) -> User:
    """The user with this id or name."""
    row = session.scalar(select(UserRow).where((UserRow.id == name_or_id) | (UserRow.name == name_or_id)))
    if row is None:
        raise NotFound(f"no user with id or name {name_or_id!r}; create one with `stash-rm users create`")
    return _user(row)


def user_names(session: Session, user_ids: Collection[str]) -> dict[str, str]:
    """The names of these users by id; an id of a deleted user is left out."""
    if not user_ids:
        return {}
    rows = session.execute(select(UserRow.id, UserRow.name).where(UserRow.id.in_(list(user_ids))))
    return {user_id: name for user_id, name in rows}


def create_key(session: Session, user_id: str, name: str, read_only: bool) -> tuple[ApiKey, str]:
    """A new key for `user_id`; returns the key and its secret, which is never stored."""
    secret = new_secret()
    row = ApiKeyRow(user_id=user_id, name=name, key_digest=digest(secret), read_only=read_only, created_at=utc_now())
    session.add(row)
    session.flush()
    return _key(row), secret


def list_keys(session: Session, user_id: str) -> list[ApiKey]:
    """The user's keys that are not revoked, oldest first."""
    rows = session.scalars(
        select(ApiKeyRow)
        .where(ApiKeyRow.user_id == user_id, ApiKeyRow.revoked_at.is_(None))
        .order_by(ApiKeyRow.created_at)
    )
    return [_key(row) for row in rows]


def revoke_key(session: Session, user_id: str, key_id: str) -> None:
    """Revoke one of the user's keys; another user's key is not found."""
    row = session.scalar(select(ApiKeyRow).where(ApiKeyRow.id == key_id, ApiKeyRow.user_id == user_id))
    if row is None or row.revoked_at is not None:
        raise NotFound(f"no API key {key_id!r}")
    row.revoked_at = utc_now()


def find_principal(session: Session, secret: str) -> Principal | None:
    """Who a presented key belongs to, or None for an unknown or revoked key."""
    found = session.execute(
        select(ApiKeyRow, UserRow)
        .join(UserRow, UserRow.id == ApiKeyRow.user_id)
        .where(ApiKeyRow.key_digest == digest(secret), ApiKeyRow.revoked_at.is_(None))
    ).first()
    if found is None:
        return None
    key, user = found
    return Principal(
        user_id=user.id,
        user_name=user.name,
        key_id=key.id,
        read_only=key.read_only,
        reward_models_enabled=user.reward_models_enabled,
    )


def set_reward_models_enabled(session: Session, name_or_id: str, enabled: bool) -> User:
    """Switch the reward-model API on or off for one user; their data stays."""
    user = find_user(session, name_or_id)
    row = session.get(UserRow, user.id)
    assert row is not None
    row.reward_models_enabled = enabled
    return user


def _user(row: UserRow) -> User:
    return User(id=row.id, name=row.name, created_at=row.created_at)


def _key(row: ApiKeyRow) -> ApiKey:
    return ApiKey(id=row.id, user_id=row.user_id, name=row.name, read_only=row.read_only, created_at=row.created_at)
