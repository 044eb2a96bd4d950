"""/healthz and /metrics: how operators and probes watch the gateway."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from stash_gateway.state import Services, Settings

router = APIRouter(tags=["operations"])


@router.get("/healthz", summary="Health of the gateway and every service behind it")
def healthz(services: Services, settings: Settings) -> JSONResponse:
    """200 when every service answers SERVING over gRPC health; 503 naming each one that does not."""
    statuses = services.health(settings.health_timeout_s)
    down = [f"{name} is {status}" for name, status in statuses.items() if status != "SERVING"]
    if down:
        return JSONResponse({"status": "unavailable", "detail": "; ".join(down), "services": statuses}, 503)
    return JSONResponse({"status": "ok", "services": statuses})


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
def metrics(request: Request) -> Response:
    """The gateway's metrics in the Prometheus text format."""
    return Response(generate_latest(request.app.state.metrics.registry), media_type=CONTENT_TYPE_LATEST)
