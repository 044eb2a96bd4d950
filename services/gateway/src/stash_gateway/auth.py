"""Bearer authentication against hashed API keys, for REST (FastAPI dependencies) and OTLP/gRPC.

The web UI signs in once and then sends the key as an HttpOnly session cookie instead of a header;
a cookie travels with any request the browser makes, so a cookie-authenticated write must also carry
the session's CSRF token in a header that another site's page cannot set or know.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session, sessionmaker

from stash_common.db import transaction
from stash_common.errors import PermissionDenied, Unauthenticated
from stash_gateway.accounts import Principal
from stash_gateway.store import find_principal

_bearer = HTTPBearer(auto_error=False, description="A Stash RM API key: `Authorization: Bearer srm_…`")
SESSION_COOKIE = "stash_session"
CSRF_HEADER = "X-Stash-CSRF"
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


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


def csrf_token(secret: str) -> str:
    """The CSRF token of a browser session: derived from its key, so no server state is needed and
    every gateway replica agrees; one-way, so the page that holds it never learns the key."""
    return hashlib.sha256(b"stash-rm csrf\0" + secret.encode()).hexdigest()


def presented_secret(request: Request, credentials: HTTPAuthorizationCredentials | None) -> str | None:
    """The key of a request: the bearer header when sent (unchanged for API clients), otherwise the
    web UI's session cookie, whose writes must carry the matching CSRF header (403 otherwise)."""
    if credentials is not None:
        return credentials.credentials
    secret = request.cookies.get(SESSION_COOKIE)
    if secret and request.method not in _SAFE_METHODS:
        sent = request.headers.get(CSRF_HEADER, "")
        if not hmac.compare_digest(sent.encode(), csrf_token(secret).encode()):
            raise PermissionDenied(f"missing or wrong {CSRF_HEADER} header: a browser session's writes need its token")
    return secret


def authenticate(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> Principal:
    """Any valid key: the caller may read."""
    return authorize(request.app.state.sessions, presented_secret(request, credentials), write=False)


def require_write(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> Principal:
    """A full-access key: the caller may change data."""
    return authorize(request.app.state.sessions, presented_secret(request, credentials), write=True)


Reader = Annotated[Principal, Depends(authenticate)]
Writer = Annotated[Principal, Depends(require_write)]
