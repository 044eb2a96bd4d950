"""/me and /keys: who the caller is, and the caller's API keys."""

from __future__ import annotations

from fastapi import APIRouter, Request, status
from pydantic import BaseModel, Field

from stash_common.db import transaction
from stash_gateway.accounts import ApiKey
from stash_gateway.auth import Reader, Writer
from stash_gateway.openapi import RequestBody, UtcDateTime
from stash_gateway.routes import API_PREFIX
from stash_gateway.store import create_key, list_keys, revoke_key

router = APIRouter(prefix=API_PREFIX, tags=["account"])


class Me(BaseModel):
    """The authenticated caller."""

    user_id: str
    user_name: str
    key_id: str
    read_only: bool
    reward_models_enabled: bool


class KeyOut(BaseModel):
    """An API key without its secret."""

    id: str
    name: str
    read_only: bool
    created_at: UtcDateTime


class CreatedKey(KeyOut):
    """A new API key; `key` is shown this once and never again."""

    key: str


class CreateKey(RequestBody):
    """What a new key is called and whether it may change data."""

    name: str = Field("api", min_length=1, max_length=200)
    read_only: bool = False


def _key_out(key: ApiKey) -> KeyOut:
    return KeyOut(id=key.id, name=key.name, read_only=key.read_only, created_at=key.created_at)


@router.get("/me", response_model=Me, summary="The caller behind the API key")
def me(principal: Reader) -> Me:
    """Who the presented key belongs to."""
    return Me(**vars(principal))


@router.get("/keys", response_model=list[KeyOut], summary="The caller's API keys")
def get_keys(request: Request, principal: Reader) -> list[KeyOut]:
    """Every key of the caller that is not revoked."""
    with transaction(request.app.state.sessions) as session:
        return [_key_out(key) for key in list_keys(session, principal.user_id)]


@router.post("/keys", response_model=CreatedKey, status_code=status.HTTP_201_CREATED, summary="Create an API key")
def post_key(request: Request, body: CreateKey, principal: Writer) -> CreatedKey:
    """A new key for the caller; needs a full-access key."""
    with transaction(request.app.state.sessions) as session:
        key, secret = create_key(session, principal.user_id, body.name, body.read_only)
    return CreatedKey(**_key_out(key).model_dump(), key=secret)


@router.delete("/keys/{key_id}", status_code=status.HTTP_204_NO_CONTENT, summary="Revoke an API key")
def delete_key(request: Request, key_id: str, principal: Writer) -> None:
    """Revoke one of the caller's keys; it stops working at once."""
    with transaction(request.app.state.sessions) as session:
        revoke_key(session, principal.user_id, key_id)
