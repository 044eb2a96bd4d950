"""What the command line reads from the environment, without importing any service.

The CLI is a client: it learns the local stack's ports from the same variables the services
read (`STASH_<SERVICE>_PORT`, with the shared defaults of `stash_common.settings`), and the
gateway's address and credentials from its own (`STASH_URL`, `STASH_API_KEY`, `STASH_ADMIN_KEY`).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from stash_common.settings import (
    DEFAULT_GATEWAY_PORT,
    DEFAULT_GRPC_PORTS,
    DEFAULT_OTLP_GRPC_PORT,
    Profile,
    default_data_dir,
    shared,
)


class CliSettings(BaseSettings):
    """The profile, the data directory, the local stack's ports and how to reach the gateway."""

    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True)

    profile: Profile = shared("STASH_PROFILE", "embedded", "embedded (one machine) or cluster")
    data_dir: Path = Field(
        default_factory=default_data_dir,
        validation_alias="STASH_DATA_DIR",
        description="directory for the embedded profile's files",
    )
    url: str | None = shared("STASH_URL", None, "the gateway's base URL (default: the local gateway's port)")
    api_key: str | None = shared("STASH_API_KEY", None, "an API key from `stash-rm users create` or `keys create`")
    admin_key: str | None = shared(
        "STASH_ADMIN_KEY", None, "the gateway's admin key (embedded default: the data directory's admin.key)"
    )
    gateway_port: int = shared("STASH_GATEWAY_PORT", DEFAULT_GATEWAY_PORT, "port of the gateway's REST API")
    otlp_grpc_port: int = shared("STASH_GATEWAY_OTLP_GRPC_PORT", DEFAULT_OTLP_GRPC_PORT, "port of OTLP/gRPC")
    ingest_port: int = shared("STASH_INGEST_PORT", DEFAULT_GRPC_PORTS["ingest"], "gRPC port of ingest")
    labeler_port: int = shared("STASH_LABELER_PORT", DEFAULT_GRPC_PORTS["labeler"], "gRPC port of the labeler")
    trainer_port: int = shared("STASH_TRAINER_PORT", DEFAULT_GRPC_PORTS["trainer"], "gRPC port of the trainer")
    scorer_port: int = shared("STASH_SCORER_PORT", DEFAULT_GRPC_PORTS["scorer"], "gRPC port of the scorer")
    gepa_port: int = shared("STASH_GEPA_PORT", DEFAULT_GRPC_PORTS["gepa"], "gRPC port of GEPA")
    task_model: str | None = shared("STASH_TASK_MODEL", None, "the main job's GEPA task model (LiteLLM string)")
    task_api_base: str | None = shared("STASH_TASK_API_BASE", None, "API base of the main job's task model")
    reflection_model: str | None = shared("STASH_REFLECTION_MODEL", None, "the main job's GEPA reflection model")
    anthropic_api_key: str | None = shared(
        "ANTHROPIC_API_KEY", None, "the key the default GEPA models need (the services read it too)"
    )

    @property
    def gepa_configured(self) -> bool:
        """Whether the main job can run GEPA: a task model is named, or the default (Anthropic) models have a key."""
        return bool(self.task_model or self.anthropic_api_key)

    def gepa_settings(self) -> dict[str, str | None]:
        """The main job's GEPA run settings (unset: the server's defaults)."""
        return {
            "task_model": self.task_model,
            "task_api_base": self.task_api_base,
            "reflection_model": self.reflection_model,
        }

    @property
    def local_gateway_url(self) -> str:
        """The local stack's gateway, as reached on this machine."""
        return f"http://127.0.0.1:{self.gateway_port}"

    @property
    def gateway_url(self) -> str:
        """Where client commands send requests: `STASH_URL`, else the local gateway."""
        return (self.url or self.local_gateway_url).rstrip("/")

    def grpc_port(self, service: str) -> int:
        """The port a gRPC service of the local stack listens on."""
        return int(getattr(self, f"{service}_port"))
