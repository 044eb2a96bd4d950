"""Bearer authentication against hashed API keys, as FastAPI dependencies."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from stash_common.db import transaction
from stash_common.errors import PermissionDenied, Unauthenticated
from stash_gateway.accounts import Principal
from stash_gateway.store import find_principal

_bearer = HTTPBearer(auto_error=False, description="A Stash RM API key: `Authorization: Bearer srm_…`")


def authenticate(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> Principal:
    """The caller behind the bearer key; 401 without a key or with one that matches nothing."""
    if credentials is None:
        raise Unauthenticated("missing API key: send `Authorization: Bearer <key>`")
    with transaction(request.app.state.sessions) as session:
        principal = find_principal(session, credentials.credentials)
    if principal is None:
        raise Unauthenticated("invalid or revoked API key")
    if not principal.reward_models_enabled:
        raise PermissionDenied("reward models are disabled for this account; ask an operator to enable them")
    return principal


def require_write(principal: Annotated[Principal, Depends(authenticate)]) -> Principal:
    """The caller, who must hold a full-access key; read-only keys get 403."""
    if principal.read_only:
        raise PermissionDenied("this API key is read-only; use a full-access key to change data")
    return principal


Reader = Annotated[Principal, Depends(authenticate)]
Writer = Annotated[Principal, Depends(require_write)]
