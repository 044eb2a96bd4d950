"""Signed downloads of artifacts kept in the local data directory (the embedded profile's S3)."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from fastapi.responses import FileResponse

from stash_common.errors import NotFound
from stash_common.storage import verify_signed_request
from stash_gateway.routes import API_PREFIX

router = APIRouter(prefix=API_PREFIX, tags=["artifacts"])


@router.get("/artifacts/{key:path}", summary="Download an artifact through a signed URL", response_class=FileResponse)
def download(request: Request, key: str, expires: str = Query(), signature: str = Query()) -> FileResponse:
    """The artifact's bytes when the URL's signature is valid and not expired (403 otherwise)."""
    store = request.app.state.artifacts
    verify_signed_request(key, expires, signature, store.signing_key)
    path = store.path_for(key)
    if not path.is_file():
        raise NotFound(f"artifact {key!r} does not exist")
    return FileResponse(path, filename=path.name)
