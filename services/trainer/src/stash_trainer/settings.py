"""TrainerSettings: where the trainer listens, its database, object storage, and how it runs training jobs."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field

from stash_common.settings import (
    DEFAULT_GATEWAY_PORT,
    DEFAULT_GRPC_PORTS,
    ServiceSettings,
    cluster_required,
    service_config,
    shared,
)

EMBEDDED_BASE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
CLUSTER_BASE_MODEL = "Qwen/Qwen3-0.6B"


class TrainerSettings(ServiceSettings):
    """Settings of the trainer service (`STASH_TRAINER_*`)."""

    service: ClassVar[str] = "trainer"
    model_config = service_config("trainer")

    port: int = DEFAULT_GRPC_PORTS["trainer"]
    # A str once loaded: the embedded profile fills in its SQLite file, the cluster one refuses to start without it.
    database_url: str = cluster_required(
        "STASH_TRAINER_DATABASE_URL", "PostgreSQL URL for the trainer's reward models and training pairs"
    )
    redis_url: str | None = cluster_required(
        "STASH_TRAINER_REDIS_URL", "Redis URL for waking every trainer replica when a model is queued"
    )
    base_model: str = Field(
        default_factory=lambda fields: CLUSTER_BASE_MODEL if fields["profile"] == "cluster" else EMBEDDED_BASE_MODEL,
        description=f"default base model (embedded: {EMBEDDED_BASE_MODEL}, packaged; cluster: {CLUSTER_BASE_MODEL})",
    )
    launcher: Literal["local", "kubernetes"] = shared(
        "STASH_LAUNCHER", "local", "where workers run: local subprocesses, or Kubernetes Jobs (STASH_JOB_* settings)"
    )
    artifact_dir: Path = Field(
        default_factory=lambda fields: fields["data_dir"] / "jobs",
        description="where local workers' output goes, one log per job (default: <data dir>/jobs)",
    )
    submit_timeout_s: float = Field(35 * 60, gt=0, description="a claimed model whose job never started fails after")
    job_timeout_s: float = Field(70 * 60, gt=0, description="a running job fails after")
    sweep_interval_s: float = Field(30.0, gt=0, description="seconds between recovery sweeps")
    max_length: int = Field(1024, ge=16, description="token limit of a training input (left-truncated)")
    batch_size: int = Field(8, ge=1, description="preference pairs per training step")
    learning_rate: float = Field(1e-4, gt=0, description="AdamW learning rate")
    device: Literal["auto", "cpu", "cuda", "mps"] = Field(
        "auto", description="what training jobs run on: auto (CUDA, then MPS, then CPU), cpu, cuda or mps"
    )
    s3_bucket: str | None = shared("STASH_S3_BUCKET", None, "S3 bucket for checkpoints; unset: the local data dir")
    s3_endpoint_url: str | None = shared("STASH_S3_ENDPOINT_URL", None, "S3-compatible endpoint URL")
    s3_region: str | None = shared("STASH_S3_REGION", None, "S3 region")
    public_url: str | None = shared("STASH_PUBLIC_URL", None, "URL clients reach the gateway at (signed downloads)")
    gateway_port: int = shared("STASH_GATEWAY_PORT", DEFAULT_GATEWAY_PORT, "the gateway's port (local downloads)")
    signing_key: str | None = shared("STASH_SIGNING_KEY", None, "secret that signs local download URLs")
    openai_api_key: str | None = shared(
        "STASH_OPENAI_API_KEY", None, "OpenAI key for feedback extraction; unset: ratings and automatic pairs only"
    )
    openai_base_url: str | None = shared("STASH_OPENAI_BASE_URL", None, "OpenAI-compatible API base URL override")
    feedback_model: str = shared("STASH_FEEDBACK_MODEL", "gpt-6-sol", "the feedback classifier's model")

    @property
    def download_base_url(self) -> str:
        """Where signed local downloads point: the gateway."""
        return (self.public_url or f"http://{self.host}:{self.gateway_port}").rstrip("/")
