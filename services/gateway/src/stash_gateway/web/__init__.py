"""The web UI: a page shell and its ES modules and CSS, served by the gateway at `/`.

Nothing is built or fetched from elsewhere: the files under `static/` ship inside the package and the
browser loads them as they are. The UI is a client of the public REST API only; this package adds the
sign-in that turns an API key into an HttpOnly session cookie (see `stash_gateway.auth`) and the
security headers every page and every cookie-authenticated answer carry.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from fastapi import FastAPI, Request, Response
from fastapi.staticfiles import StaticFiles

from stash_gateway.auth import SESSION_COOKIE
from stash_gateway.routes import API_PREFIX
from stash_gateway.web import pages

STATIC_DIR = Path(__file__).parent / "static"
STATIC_PREFIX = "/ui/static"

# Scripts and styles only from this origin (no inline script or style attribute), no framing.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)


def install(app: FastAPI) -> None:
    """Serve the UI's pages and files, and add its headers to every answer outside the API's own."""
    app.include_router(pages.router)
    # Compressed like every answer, by the app's GZipMiddleware (see `stash_gateway.app`).
    app.mount(STATIC_PREFIX, StaticFiles(directory=STATIC_DIR), name="ui-static")
    app.middleware("http")(_security_headers)


async def _security_headers(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
    """The page policy on the UI's answers; no caching of anything a session cookie authorised."""
    response = await call_next(request)
    path = request.url.path
    if not path.startswith(API_PREFIX) and not path.startswith(("/docs", "/openapi.json")):
        response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        response.headers.setdefault("X-Frame-Options", "DENY")
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "no-referrer")
    if path.startswith(STATIC_PREFIX):
        # Revalidated by ETag: a new release's files are picked up at once, an unchanged one costs a 304.
        response.headers.setdefault("Cache-Control", "no-cache")
    elif SESSION_COOKIE in request.cookies or not path.startswith(API_PREFIX):
        response.headers.setdefault("Cache-Control", "no-store")
    return response
