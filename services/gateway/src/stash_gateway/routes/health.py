"""/livez, /readyz (and /healthz) and /metrics: how operators and probes watch the gateway.

Liveness and readiness are kept apart (`stash_common.readiness`): /livez answers while the gateway's process
serves HTTP, whatever its stores do, so a database outage never gets it restarted; /readyz answers 200 only
while the gateway's database and every service behind it (each with its own database) are ready, and names
what is not, so traffic is routed elsewhere meanwhile. /healthz is the name `stash-rm` and earlier charts
used for readiness, kept as its alias.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.concurrency import run_in_threadpool

from stash_common.outages import REDIS
from stash_common.readiness import StoreCheck, unreachable
from stash_gateway.state import Services, Settings

router = APIRouter(tags=["operations"])


@router.get("/livez", summary="Liveness: the gateway's process answers")
def livez() -> dict[str, str]:
    """200 while the gateway serves HTTP; it asks no store and no service."""
    return {"status": "ok"}


@router.get("/readyz", summary="Readiness of the gateway, its stores and every service behind it")
@router.get("/healthz", summary="Readiness (the earlier name of /readyz)")
async def readyz(request: Request, services: Services, settings: Settings) -> JSONResponse:
    """200 when the gateway's database answers and every service reports SERVING for its readiness (its
    database answers too) as part of this stack; 503 naming each part that does not. Redis is reported but
    does not decide: while it is away, rate limits are not enforced and wake-ups wait for the next sweep."""
    checks: dict[str, StoreCheck] = request.app.state.store_checks
    down = await run_in_threadpool(unreachable, checks)
    stores = {name: "UNREACHABLE" if name in down else "SERVING" for name in checks}
    statuses = await run_in_threadpool(services.readiness, settings.health_timeout_s)
    problems = [f"{name} is {status}" for name, status in statuses.items() if status != "SERVING"]
    problems += [f"the gateway's {name} is UNREACHABLE" for name in down if name != REDIS]
    body: dict[str, Any] = {"services": statuses, "stores": stores}
    if settings.stack_id:
        body["stack_id"] = settings.stack_id
    if problems:
        return JSONResponse({"status": "unavailable", "detail": "; ".join(problems), **body}, 503)
    return JSONResponse({"status": "ok", **body})


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
def metrics(request: Request) -> Response:
    """The gateway's metrics in the Prometheus text format."""
    return Response(generate_latest(request.app.state.metrics.registry), media_type=CONTENT_TYPE_LATEST)
