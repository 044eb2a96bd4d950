"""GatewaySettings: where the gateway listens and where its users and API keys live."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, SecretStr

from stash_common.settings import (
    DEFAULT_GATEWAY_PORT,
    DEFAULT_OTLP_GRPC_PORT,
    ServiceSettings,
    cluster_required,
    service_config,
    shared,
)


class GatewaySettings(ServiceSettings):
    """Settings of the gateway (`STASH_GATEWAY_*`)."""

    service: ClassVar[str] = "gateway"
    model_config = service_config("gateway")

    port: int = DEFAULT_GATEWAY_PORT
    # A str once loaded: the embedded profile fills in its SQLite file, the cluster one refuses to start without it.
    database_url: str = cluster_required(
        "STASH_GATEWAY_DATABASE_URL", "PostgreSQL URL for the gateway's users and API keys"
    )
    redis_url: str | None = cluster_required(
        "STASH_GATEWAY_REDIS_URL", "Redis URL for the rate-limit buckets every gateway replica shares"
    )
    public_url: str | None = shared(
        "STASH_PUBLIC_URL", None, "URL clients reach the gateway at (default http://<host>:<port>)"
    )
    signing_key: str | None = shared(
        "STASH_SIGNING_KEY", None, "secret that signs local download URLs (embedded: generated in the data dir)"
    )
    admin_key: SecretStr | None = Field(
        None,
        description="secret that authorises /api/v1/admin (cluster: from a Secret, unset disables the routes;"
        " embedded: generated in the data dir)",
    )
    s3_bucket: str | None = shared("STASH_S3_BUCKET", None, "S3 bucket for artifacts; unset: the local data dir")
    max_body_bytes: int = Field(50 * 1024 * 1024, description="largest request body accepted (413 above)")
    otlp_max_decompressed_bytes: int = Field(
        50 * 1024 * 1024, description="largest OTLP body after gzip decompression (413 above)"
    )
    otlp_grpc_port: int = Field(
        DEFAULT_OTLP_GRPC_PORT, description="port of the OTLP/gRPC TraceService (0: any free port)"
    )
    # How long the gateway waits: for each call to a service (its gRPC deadline), and for open requests at shutdown.
    health_timeout_s: float = Field(2.0, description="seconds /healthz waits for each service's health answer")
    rpc_timeout_s: float = Field(30.0, description="deadline of an ordinary call to a service (reads and writes)")
    evaluation_timeout_s: float = Field(
        10.0, description="deadline of the labeler reads behind trace views (past it, a view shows no evaluation)"
    )
    score_timeout_s: float = Field(
        10.0, description="deadline of the scorer reads behind trace views (past it, a view shows no learned scores)"
    )
    import_timeout_s: float = Field(600.0, description="deadline of POST /traces/import")
    otlp_timeout_s: float = Field(120.0, description="deadline of handing one OTLP export to ingest")
    export_timeout_s: float = Field(3600.0, description="deadline of a JSONL download (traces, annotations, pairs)")
    shutdown_grace_s: int = Field(10, description="seconds open requests get to finish on SIGTERM")
    # Longer than the idle expiry of clients' connection pools (httpx 5 s, load balancers 60 s): a server that
    # closes an idle connection at the moment its client reuses it answers that request with a dropped connection.
    keep_alive_s: int = Field(75, description="seconds an idle HTTP keep-alive connection stays open")
    # POST /query: each owner's DuckDB and what one query may take.
    query_timeout_s: float = Field(10.0, description="a query running longer is interrupted (HTTP 408)")
    query_max_rows: int = Field(1000, description="rows a query returns at most (truncated: true beyond)")
    query_memory_limit_mb: int = Field(512, description="memory limit of each owner's DuckDB (tables and queries)")
    query_threads: int = Field(1, description="threads of each owner's DuckDB")
    query_concurrency: int = Field(2, description="queries (and their loads) the gateway runs at once")
    query_cache_owners: int = Field(16, description="owners whose loaded tables stay warm")
    query_cache_mb: int = Field(2048, description="memory the warm owners' databases may hold together")
    query_load_timeout_s: float = Field(120.0, description="deadline of streaming one service's tables of an owner")

    # Per-API-key rate limits (requests per minute, a minute's worth at once; 0: unlimited): 429 with Retry-After.
    rate_limit_imports_per_minute: int = Field(
        600, ge=0, description="POST /traces/import and /api/v1/me/transcripts per key and minute"
    )
    rate_limit_otlp_per_minute: int = Field(6000, ge=0, description="OTLP exports (HTTP and gRPC) per key and minute")
    rate_limit_query_per_minute: int = Field(1200, ge=0, description="POST /query per key and minute")
    max_concurrent_imports_per_key: int = Field(
        2,
        ge=0,
        description="imports one key may have running at once, before their bodies are read (429 above; 0: any)",
    )

    @property
    def base_url(self) -> str:
        """The gateway's public URL without a trailing slash."""
        return (self.public_url or f"http://{self.host}:{self.port}").rstrip("/")
