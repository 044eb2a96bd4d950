"""GepaSettings: where the gepa service listens, its database and wake-ups, and how it runs GEPA jobs."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field

from stash_common.settings import DEFAULT_GRPC_PORTS, ServiceSettings, cluster_required, service_config, shared


class GepaSettings(ServiceSettings):
    """Settings of the gepa service (`STASH_GEPA_*`)."""

    service: ClassVar[str] = "gepa"
    model_config = service_config("gepa")

    port: int = DEFAULT_GRPC_PORTS["gepa"]
    # A str once loaded: the embedded profile fills in its SQLite file, the cluster one refuses to start without it.
    database_url: str = cluster_required("STASH_GEPA_DATABASE_URL", "PostgreSQL URL for the gepa service's GEPA runs")
    redis_url: str | None = cluster_required(
        "STASH_GEPA_REDIS_URL", "Redis URL for waking every gepa replica when a run is queued"
    )
    launcher: Literal["local", "kubernetes"] = shared(
        "STASH_LAUNCHER", "local", "where workers run: local subprocesses, or Kubernetes Jobs (STASH_JOB_* settings)"
    )
    artifact_dir: Path = Field(
        default_factory=lambda fields: fields["data_dir"] / "gepa-jobs",
        description="where local GEPA workers' output goes, one log per job (default: <data dir>/gepa-jobs)",
    )
    reflection_api_base: str | None = Field(
        None, description="API base of the reflection model (an OpenAI-compatible server); unset: the provider's"
    )
    anthropic_api_key: str | None = shared(
        "ANTHROPIC_API_KEY", None, "the key the default task and reflection models (Anthropic's) need; LiteLLM reads it"
    )
    reflection_minibatch_size: int = Field(3, ge=1, description="examples GEPA reflects on per proposal")
    task_concurrency: int = Field(8, ge=1, description="task-model calls in flight at once in a GEPA job")
    max_length: int = Field(1024, ge=8, description="token limit of a scored conversation (left-truncated)")
    batch_size: int = Field(8, ge=1, description="conversations per forward pass of the reward model")
    submit_timeout_s: float = Field(10 * 60, gt=0, description="a claimed run whose job never started fails after")
    job_timeout_s: float = Field(60 * 60, gt=0, description="a running GEPA job fails after")
    sweep_interval_s: float = Field(30.0, gt=0, description="seconds between recovery sweeps")
