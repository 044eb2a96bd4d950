"""GatewaySettings: where the gateway listens and where its users and API keys live."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from stash_common.settings import DEFAULT_GATEWAY_PORT, ServiceSettings, cluster_required, service_config, shared


class GatewaySettings(ServiceSettings):
    """Settings of the gateway (`STASH_GATEWAY_*`)."""

    service: ClassVar[str] = "gateway"
    model_config = service_config("gateway")

    port: int = DEFAULT_GATEWAY_PORT
    database_url: str | None = cluster_required(
        "STASH_GATEWAY_DATABASE_URL", "PostgreSQL URL for the gateway's users and API keys"
    )
    public_url: str | None = shared(
        "STASH_PUBLIC_URL", None, "URL clients reach the gateway at (default http://<host>:<port>)"
    )
    signing_key: str | None = shared(
        "STASH_SIGNING_KEY", None, "secret that signs local download URLs (embedded: generated in the data dir)"
    )
    s3_bucket: str | None = shared("STASH_S3_BUCKET", None, "S3 bucket for artifacts; unset: the local data dir")
    max_body_bytes: int = Field(50 * 1024 * 1024, description="largest request body accepted (413 above)")
    otlp_max_decompressed_bytes: int = Field(
        50 * 1024 * 1024, description="largest OTLP body after gzip decompression (413 above)"
    )
    otlp_grpc_port: int = Field(4317, description="port of the OTLP/gRPC TraceService (0: any free port)")
    health_timeout_s: float = 2.0

    @property
    def base_url(self) -> str:
        """The gateway's public URL without a trailing slash."""
        return (self.public_url or f"http://{self.host}:{self.port}").rstrip("/")
