"""ScorerSettings: where the scorer listens, its database and wake-ups, and how it batches scoring jobs."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field

from stash_common.settings import DEFAULT_GRPC_PORTS, ServiceSettings, cluster_required, service_config, shared


class ScorerSettings(ServiceSettings):
    """Settings of the scorer service (`STASH_SCORER_*`)."""

    service: ClassVar[str] = "scorer"
    model_config = service_config("scorer")

    port: int = DEFAULT_GRPC_PORTS["scorer"]
    # A str once loaded: the embedded profile fills in its SQLite file, the cluster one refuses to start without it.
    database_url: str = cluster_required(
        "STASH_SCORER_DATABASE_URL", "PostgreSQL URL for the scorer's scoring runs, trace scores and action scores"
    )
    redis_url: str | None = cluster_required(
        "STASH_SCORER_REDIS_URL", "Redis URL for waking every scorer replica when a scoring run is queued"
    )
    launcher: Literal["local", "kubernetes"] = shared(
        "STASH_LAUNCHER", "local", "where workers run: local subprocesses, or Kubernetes Jobs (STASH_JOB_* settings)"
    )
    artifact_dir: Path = Field(
        default_factory=lambda fields: fields["data_dir"] / "scoring-jobs",
        description="where local scoring workers' output goes, one log per job (default: <data dir>/scoring-jobs)",
    )
    debounce_s: float = Field(
        30.0, ge=0, description="a changed trace is scored once its owner has made no further change for this long"
    )
    max_active_batches: int = Field(2, ge=1, description="scoring jobs running at once, across replicas")
    batch_traces: int = Field(8, ge=1, description="traces per scoring job (one loaded checkpoint per job)")
    max_attempts: int = Field(3, ge=1, description="automatic attempts per failed trace revision")
    sweep_interval_s: float = Field(
        10.0, gt=0, description="seconds between sweeps for changed traces, retries and overdue jobs"
    )
    max_length: int = Field(1024, ge=8, description="token limit of a scored input (left-truncated), as in training")
    batch_size: int = Field(8, ge=1, description="inputs per forward pass of the scoring worker")
    job_timeout_s: float = Field(30 * 60, gt=0, description="a scoring job still running after this fails its runs")
