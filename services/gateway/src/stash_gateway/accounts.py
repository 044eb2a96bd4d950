"""Users and API keys: the domain of authentication.

An API key is shown once, when it is created; only its SHA-256 digest is stored. Keys carry
256 bits of randomness, so a fast digest is enough (a slow password hash buys nothing here)
and lookups by digest stay O(1).
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime

KEY_PREFIX = "srm_"


@dataclass(frozen=True)
class User:
    """A person or team that owns traces, models and runs."""

    id: str
    name: str
    created_at: datetime


@dataclass(frozen=True)
class ApiKey:
    """A bearer credential of one user; read-only keys cannot change anything."""

    id: str
    user_id: str
    name: str
    read_only: bool
    created_at: datetime


@dataclass(frozen=True)
class Principal:
    """Who a request acts for: every read and write is scoped to `user_id`."""

    user_id: str
    user_name: str
    key_id: str
    read_only: bool
    reward_models_enabled: bool = True


def new_secret() -> str:
    """A fresh API key: recognisable prefix plus 256 random bits."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def digest(secret: str) -> str:
    """What is stored for a key: the hex SHA-256 of the whole key."""
    return hashlib.sha256(secret.encode()).hexdigest()
