"""IngestSettings: where the ingest service listens, its database, limits and the title model."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from stash_common.settings import DEFAULT_GRPC_PORTS, ServiceSettings, cluster_required, service_config, shared


class IngestSettings(ServiceSettings):
    """Settings of the ingest service (`STASH_INGEST_*`)."""

    service: ClassVar[str] = "ingest"
    model_config = service_config("ingest")

    port: int = DEFAULT_GRPC_PORTS["ingest"]
    database_url: str = cluster_required(
        "STASH_INGEST_DATABASE_URL", "PostgreSQL URL for ingest's traces, steps, spans and annotations"
    )
    anthropic_api_key: str | None = shared(
        "STASH_ANTHROPIC_API_KEY", None, "Anthropic key for generated titles; unset: titles from the first request"
    )
    anthropic_base_url: str | None = shared("STASH_ANTHROPIC_BASE_URL", None, "Anthropic API base URL override")
    fast_model: str = shared("STASH_FAST_MODEL", "claude-haiku-4-5", "the fast Anthropic model for titles")
    revision_settle_s: float = Field(
        30.0, ge=0, description="seconds a change waits before the labeler's sweep may list it"
    )
