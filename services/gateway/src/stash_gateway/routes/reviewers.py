"""/reviewers and /shared: an owner shares traces with reviewers, who read and annotate them.

The owner names a reviewer by user name and shares every trace or chosen sources; ingest stores the grant and
decides every access by it (`stash_gateway.access`). A reviewer finds the shared traces under /shared/traces
(filtered by the owners and sources of /shared/owners and /shared/sources), opens them with
GET /traces/{trace_id} like their own, and annotates them; everything else stays the owner's.
"""

from __future__ import annotations

from datetime import date
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response, status
from pydantic import Field
from sqlalchemy.orm import Session, sessionmaker

from stash.rm.v1 import ingest_pb2
from stash_common.db import transaction
from stash_gateway.accounts import Principal
from stash_gateway.auth import Reader, Writer
from stash_gateway.openapi import RequestBody
from stash_gateway.rest_json import timestamp_json
from stash_gateway.routes import API_PREFIX
from stash_gateway.routes.paging import Page
from stash_gateway.routes.traces import TRACE_ORDERS, TraceSort, import_window, trace_page
from stash_gateway.state import Services, Settings
from stash_gateway.store import find_user, user_names

router = APIRouter(prefix=API_PREFIX, tags=["reviewers"])
ReviewerName = Annotated[str, Path(min_length=1, max_length=200, description="the reviewer's user name")]


class GrantBody(RequestBody):
    """`{source_ids?}`: the sources to share; null or absent shares every trace, present and future."""

    source_ids: list[Annotated[str, Field(min_length=1, max_length=200)]] | None = Field(
        None, min_length=1, max_length=200, description="source ids to share; null: every source"
    )


def _sessions(request: Request) -> sessionmaker[Session]:
    sessions: sessionmaker[Session] = request.app.state.sessions
    return sessions


def _names(request: Request, user_ids: list[str]) -> dict[str, str]:
    with transaction(_sessions(request)) as session:
        return user_names(session, user_ids)


def _grant_json(grant: ingest_pb2.ReviewGrant, names: dict[str, str]) -> dict[str, Any]:
    return {
        "owner_id": grant.owner_id,
        "owner_name": names.get(grant.owner_id),
        "reviewer_id": grant.reviewer_id,
        "reviewer_name": names.get(grant.reviewer_id),
        "all_sources": grant.all_sources,
        "source_ids": list(grant.source_ids),
        "created_at": timestamp_json(grant, "created_at"),
        "updated_at": timestamp_json(grant, "updated_at"),
    }


def _grants(
    request: Request, services: Services, settings: Settings, principal: Principal, shared: bool
) -> list[dict[str, Any]]:
    message = ingest_pb2.ListReviewGrantsRequest(owner_id=principal.user_id, shared_with_me=shared)
    grants = services.ingest.ListReviewGrants(message, timeout=settings.rpc_timeout_s).grants
    names = _names(request, [user for grant in grants for user in (grant.owner_id, grant.reviewer_id)])
    return [_grant_json(grant, names) for grant in grants]


@router.get("/reviewers", summary="The reviewers the caller shares traces with")
def list_reviewers(request: Request, services: Services, settings: Settings, principal: Reader) -> list[dict[str, Any]]:
    """`[ReviewGrant]`: `{owner_id, owner_name, reviewer_id, reviewer_name, all_sources, source_ids, created_at,
    updated_at}`, oldest first."""
    return _grants(request, services, settings, principal, shared=False)


@router.put("/reviewers/{reviewer}", summary="Share traces with a reviewer, or change what is shared")
def put_reviewer(
    request: Request,
    response: Response,
    services: Services,
    settings: Settings,
    reviewer: ReviewerName,
    body: GrantBody,
    principal: Writer,
) -> dict[str, Any]:
    """The `ReviewGrant`: 201 when new, 200 when it replaced the reviewer's grant; 404 for an unknown user name,
    422 for the caller themselves."""
    with transaction(_sessions(request)) as session:
        user = find_user(session, reviewer)
    message = ingest_pb2.PutReviewGrantRequest(
        owner_id=principal.user_id,
        reviewer_id=user.id,
        all_sources=body.source_ids is None,
        source_ids=body.source_ids or [],
    )
    answer = services.ingest.PutReviewGrant(message, timeout=settings.rpc_timeout_s)
    response.status_code = status.HTTP_201_CREATED if answer.created else status.HTTP_200_OK
    return _grant_json(answer.grant, {principal.user_id: principal.user_name, user.id: user.name})


@router.delete("/reviewers/{reviewer}", status_code=status.HTTP_204_NO_CONTENT, summary="Stop sharing with a reviewer")
def delete_reviewer(
    request: Request, services: Services, settings: Settings, reviewer: ReviewerName, principal: Writer
) -> Response:
    """Revoke the reviewer's grant: their next request no longer finds the caller's traces."""
    with transaction(_sessions(request)) as session:
        user = find_user(session, reviewer)
    message = ingest_pb2.DeleteReviewGrantRequest(owner_id=principal.user_id, reviewer_id=user.id)
    services.ingest.DeleteReviewGrant(message, timeout=settings.rpc_timeout_s)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/shared/owners", summary="The owners who share traces with the caller")
def shared_owners(request: Request, services: Services, settings: Settings, principal: Reader) -> list[dict[str, Any]]:
    """`[ReviewGrant]` the caller received, oldest first."""
    return _grants(request, services, settings, principal, shared=True)


@router.get("/shared/sources", summary="The sources of the traces shared with the caller")
def shared_sources(request: Request, services: Services, settings: Settings, principal: Reader) -> list[dict[str, Any]]:
    """`[{owner_id, owner_name, source_id, name, trace_count}]`: each owner's sources the caller's grants cover,
    named with the owner's aliases, counting the shared traces; by owner id, then source id. The values for the
    `owner_id` and `source_id` filters of GET /shared/traces."""
    message = ingest_pb2.ListTraceSourcesRequest(owner_id=principal.user_id, shared_with_me=True)
    sources = services.ingest.ListTraceSources(message, timeout=settings.rpc_timeout_s).sources
    names = _names(request, [source.owner_id for source in sources])
    return [
        {
            "owner_id": source.owner_id,
            "owner_name": names.get(source.owner_id),
            "source_id": source.source_id,
            "name": source.name,
            "trace_count": source.trace_count,
        }
        for source in sources
    ]


@router.get("/shared/traces", summary="Traces other owners share with the caller, newest import first")
def shared_traces(
    request: Request,
    services: Services,
    settings: Settings,
    principal: Reader,
    page: Page,
    owner_id: Annotated[str | None, Query(description="only this owner's traces")] = None,
    source_id: str | None = None,
    imported_from: Annotated[date | None, Query(description="first import date, inclusive")] = None,
    imported_to: Annotated[date | None, Query(description="last import date, inclusive")] = None,
    tz: Annotated[str, Query(description="IANA time zone of the import dates")] = "UTC",
    pattern: Annotated[str | None, Query(description="only traces with this process pattern")] = None,
    sort: Annotated[
        TraceSort, Query(description="imported: newest import first; source / -source: by source name A–Z / Z–A")
    ] = "imported",
) -> dict[str, Any]:
    """`{traces: [TraceSummary + owner_name], total}` with the same filters, paging and sorting as GET /traces;
    `latest_score` is always null (the owners' reward models are theirs alone)."""
    after, before = import_window(imported_from, imported_to, tz)
    message = ingest_pb2.ListTracesRequest(
        owner_id=principal.user_id,
        shared_with_me=True,
        trace_owner_id=owner_id,
        page=page,
        source_id=source_id,
        created_after=after,
        created_before=before,
        order=TRACE_ORDERS[sort],
    )
    owners = [grant["owner_id"] for grant in _grants(request, services, settings, principal, shared=True)]
    if owner_id is not None:
        owners = [owner for owner in owners if owner == owner_id]
    listed = trace_page(services, settings, principal, message, owners, pattern)
    names = _names(request, owners)
    for trace in listed["traces"]:
        trace["owner_name"] = names.get(trace["source_owner_id"])
    return listed
