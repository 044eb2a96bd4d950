"""The UI's page routes and its session: sign in with an API key, who is signed in, sign out."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse
from pydantic import Field

from stash_common.errors import Unauthenticated
from stash_gateway.auth import SESSION_COOKIE, authorize, csrf_token
from stash_gateway.openapi import ClosedBody

router = APIRouter(include_in_schema=False)
INDEX_HTML = Path(__file__).parent / "static" / "index.html"
# Every path the page shell answers; the modules read the path and draw the screen.
PAGE_PATHS = (
    "/",
    "/traces",
    "/traces/{trace_id}",
    "/traces/{trace_id}/sections",
    "/models",
    "/models/{model_id}",
    "/skills",
    "/skills/{run_id}",
    "/evaluator",
    "/reviewers",
    "/shared",
)


class SignInBody(ClosedBody):
    """`{key}`: the API key the browser session will act with."""

    key: str = Field(min_length=1, max_length=500)


@cache
def _index() -> str:
    return INDEX_HTML.read_text(encoding="utf-8")


def page_shell() -> HTMLResponse:
    """The one HTML document of the UI (its modules pick the screen from the path)."""
    return HTMLResponse(_index())


for _path in PAGE_PATHS:
    router.add_api_route(_path, page_shell, methods=["GET"], response_class=HTMLResponse)


def _session(request: Request, secret: str) -> dict[str, Any]:
    principal = authorize(request.app.state.sessions, secret, write=False)
    return {
        "csrf": csrf_token(secret),
        "user_name": principal.user_name,
        "user_id": principal.user_id,
        "read_only": principal.read_only,
    }


@router.post("/ui/session")
def sign_in(request: Request, body: SignInBody, response: Response) -> dict[str, Any]:
    """Check the key (401 unknown, 403 account switched off) and keep it in an HttpOnly cookie."""
    session = _session(request, body.key.strip())
    response.set_cookie(
        SESSION_COOKIE,
        body.key.strip(),
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )
    return session


@router.get("/ui/session")
def current_session(request: Request) -> dict[str, Any]:
    """Who the session cookie signs in as, with the CSRF token its writes send; 401 without one."""
    secret = request.cookies.get(SESSION_COOKIE)
    if not secret:
        raise Unauthenticated("not signed in: POST /ui/session with an API key")
    return _session(request, secret)


@router.delete("/ui/session", status_code=204)
def sign_out() -> Response:
    """Forget the session cookie (the key itself stays valid; revoke it under /keys)."""
    response = Response(status_code=204)
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
    return response
