"""Who may do what to a trace, as ingest decides it: the gateway asks once per request and acts for the owner.

Ingest owns traces and review grants, so it alone answers whether the caller reads a trace as its owner or as a
reviewer (`AuthorizeTrace`). A route that reads on behalf of a reviewer passes the trace owner's id to the other
services; a route only an owner may use answers 403 with the reason to a reviewer. Nothing is cached, so a
revoked grant stops working on the next request.
"""

from __future__ import annotations

from stash.rm.v1 import common_pb2, ingest_pb2
from stash_common.errors import PermissionDenied
from stash_gateway.accounts import Principal
from stash_gateway.peers import Peers
from stash_gateway.settings import GatewaySettings


def trace_access(
    services: Peers, settings: GatewaySettings, principal: Principal, trace_id: str
) -> ingest_pb2.AuthorizeTraceResponse:
    """The trace's owner and whether the caller is its reviewer; 404 when the caller may not read it."""
    message = ingest_pb2.AuthorizeTraceRequest(owner_id=principal.user_id, trace_id=trace_id)
    return services.ingest.AuthorizeTrace(message, timeout=settings.rpc_timeout_s)


def require_owner(services: Peers, settings: GatewaySettings, principal: Principal, trace_id: str, doing: str) -> None:
    """Nothing for the trace's owner; 403 naming what only the owner may do for a reviewer; 404 for anyone else."""
    if trace_access(services, settings, principal, trace_id).reviewer:
        raise PermissionDenied(f"trace {trace_id} is shared with you for review: only its owner can {doing}")


def refuse_reviewed(services: Peers, settings: GatewaySettings, principal: Principal, trace_ids: list[str]) -> None:
    """403 when one of `trace_ids` is shared with the caller for review: only its owner may train on it."""
    message = ingest_pb2.ListTracesRequest(
        owner_id=principal.user_id,
        shared_with_me=True,
        trace_ids=trace_ids,
        page=common_pb2.PageRequest(limit=1),
    )
    shared = services.ingest.ListTraces(message, timeout=settings.rpc_timeout_s).traces
    if shared:
        raise PermissionDenied(f"trace {shared[0].id} is shared with you for review: only its owner can train on it")
