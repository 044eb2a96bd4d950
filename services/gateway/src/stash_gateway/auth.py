"""Bearer authentication against hashed API keys, for REST (FastAPI dependencies) and OTLP/gRPC."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session, sessionmaker

from stash_common.db import transaction
from stash_common.errors import PermissionDenied, Unauthenticated
from stash_gateway.accounts import Principal
from stash_gateway.store import find_principal

_bearer = HTTPBearer(auto_error=False, description="A Stash RM API key: `Authorization: Bearer srm_…`")


def authorize(sessions: sessionmaker[Session], secret: str | None, write: bool) -> Principal:
    """The caller behind a presented key: 401 without a key or with one that matches nothing,
    403 for a disabled account or a read-only key that tries to write."""
    if not secret:
        raise Unauthenticated("missing API key: send `Authorization: Bearer <key>`")
    with transaction(sessions) as session:
        principal = find_principal(session, secret)
    if principal is None:
        raise Unauthenticated("invalid or revoked API key")
    if not principal.reward_models_enabled:
        raise PermissionDenied("reward models are disabled for this account; ask an operator to enable them")
    if write and principal.read_only:
        raise PermissionDenied("this API key is read-only; use a full-access key to change data")
    return principal


def bearer_secret(header: str | None) -> str | None:
    """The key in an `Authorization: Bearer <key>` value (gRPC metadata carries it the same way)."""
    scheme, _, secret = (header or "").partition(" ")
    return secret.strip() if scheme.lower() == "bearer" else None


def authenticate(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> Principal:
    """Any valid key: the caller may read."""
    return authorize(request.app.state.sessions, credentials.credentials if credentials else None, write=False)


def require_write(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> Principal:
    """A full-access key: the caller may change data."""
    return authorize(request.app.state.sessions, credentials.credentials if credentials else None, write=True)


Reader = Annotated[Principal, Depends(authenticate)]
Writer = Annotated[Principal, Depends(require_write)]
