"""/api/v1/admin: users and their keys, managed by an operator holding the gateway's admin key.

The CLI's account commands call these routes, so `stash-rm users create` works the same against
a laptop and a cluster and nothing but the gateway writes the gateway's tables. The admin key is
not an API key: it belongs to no user and lives outside the database. In the cluster profile an
operator sets `STASH_GATEWAY_ADMIN_KEY` from a Secret, and without it the routes refuse every
call; in the embedded profile the gateway creates one in the data directory (mode 0600), so
whoever may read that directory may manage its users.
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import APIRouter, Depends, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel

from stash_common.db import transaction
from stash_common.errors import PermissionDenied, Unauthenticated
from stash_common.storage import ADMIN_KEY_FILE, create_secret_file
from stash_gateway.accounts import ApiKey, User
from stash_gateway.openapi import RequestBody, UtcDateTime
from stash_gateway.routes.account import CreatedKey, CreateKey
from stash_gateway.settings import GatewaySettings
from stash_gateway.store import create_key, create_user, find_user, set_reward_models_enabled

ADMIN_PREFIX = "/api/v1/admin"
FIRST_KEY_NAME = "default"

_admin_bearer = HTTPBearer(
    auto_error=False, scheme_name="AdminKey", description="The gateway's admin key: `Authorization: Bearer <key>`"
)


def admin_credential(settings: GatewaySettings) -> str | None:
    """The admin key: the configured one, else (embedded) the data directory's, else (cluster) none."""
    if settings.admin_key is not None and settings.admin_key.get_secret_value():
        return settings.admin_key.get_secret_value()
    if settings.profile == "cluster":
        return None
    path = settings.data_dir / ADMIN_KEY_FILE
    create_secret_file(path)
    return path.read_text().strip()


def require_admin(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_admin_bearer)]
) -> None:
    """403 while the routes are disabled; 401 without the admin key or with another secret."""
    expected: str | None = request.app.state.admin_key
    if expected is None:
        raise PermissionDenied(
            "admin routes are disabled: the gateway runs in the cluster profile without STASH_GATEWAY_ADMIN_KEY; "
            "set it from a Secret to manage users"
        )
    if credentials is None:
        raise Unauthenticated("missing admin key: send `Authorization: Bearer <admin key>`")
    # Constant time, so the response time says nothing about how much of a guess was right.
    if not hmac.compare_digest(credentials.credentials.encode(), expected.encode()):
        raise Unauthenticated(
            "invalid admin key: use the value of STASH_GATEWAY_ADMIN_KEY "
            f"(embedded profile: the gateway's {ADMIN_KEY_FILE} in its data directory)"
        )


# User paths take `:path` so a name with a slash (sent as %2F, decoded before routing) stays one name.
router = APIRouter(prefix=ADMIN_PREFIX, tags=["admin"], dependencies=[Depends(require_admin)])


class CreateUser(RequestBody):
    """The new user's name (unique, 1 to 200 characters)."""

    name: str


class SwitchRewardModels(RequestBody):
    """Whether the user's keys may use the reward-model API."""

    reward_models_enabled: bool


class AdminUser(BaseModel):
    """A user as an operator sees it."""

    id: str
    name: str
    created_at: UtcDateTime
    reward_models_enabled: bool


class CreatedUser(AdminUser):
    """A new user with its first full-access key; `key.key` is shown this once."""

    key: CreatedKey


def _admin_user(user: User, enabled: bool) -> AdminUser:
    return AdminUser(id=user.id, name=user.name, created_at=user.created_at, reward_models_enabled=enabled)


def _created_key(key: ApiKey, secret: str) -> CreatedKey:
    return CreatedKey(id=key.id, name=key.name, read_only=key.read_only, created_at=key.created_at, key=secret)


@router.post("/users", response_model=CreatedUser, status_code=status.HTTP_201_CREATED, summary="Create a user")
def post_user(request: Request, body: CreateUser) -> CreatedUser:
    """A new user and its first full-access key, in one transaction; 409 when the name is taken."""
    with transaction(request.app.state.sessions) as session:
        user = create_user(session, body.name)
        key, secret = create_key(session, user.id, FIRST_KEY_NAME, read_only=False)
    return CreatedUser(**_admin_user(user, enabled=True).model_dump(), key=_created_key(key, secret))


@router.post(
    "/users/{name_or_id:path}/keys",
    response_model=CreatedKey,
    status_code=status.HTTP_201_CREATED,
    summary="Create an API key for a user",
)
def post_user_key(request: Request, name_or_id: str, body: CreateKey) -> CreatedKey:
    """A new key for the user with this name or id; 404 for an unknown user."""
    with transaction(request.app.state.sessions) as session:
        key, secret = create_key(session, find_user(session, name_or_id).id, body.name, body.read_only)
    return _created_key(key, secret)


@router.patch("/users/{name_or_id:path}", response_model=AdminUser, summary="Enable or disable a user's reward models")
def patch_user(request: Request, name_or_id: str, body: SwitchRewardModels) -> AdminUser:
    """Switch the reward-model API on or off for a user (their data stays); 404 for an unknown user."""
    with transaction(request.app.state.sessions) as session:
        user = set_reward_models_enabled(session, name_or_id, body.reward_models_enabled)
    return _admin_user(user, body.reward_models_enabled)
