"""LabelerSettings: where the labeler listens, its database, wake-ups, and the optional models."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from stash_common.settings import DEFAULT_GRPC_PORTS, ServiceSettings, cluster_required, service_config, shared
from stash_labeler.prm import PRMConfig


class LabelerSettings(ServiceSettings):
    """Settings of the labeler service (`STASH_LABELER_*`)."""

    service: ClassVar[str] = "labeler"
    model_config = service_config("labeler")

    port: int = DEFAULT_GRPC_PORTS["labeler"]
    database_url: str = cluster_required(
        "STASH_LABELER_DATABASE_URL", "PostgreSQL URL for the labeler's labels, evaluations and findings"
    )
    redis_url: str | None = cluster_required(
        "STASH_LABELER_REDIS_URL", "Redis URL for waking every labeler replica when a revision is queued"
    )
    openai_api_key: str | None = shared(
        "STASH_OPENAI_API_KEY", None, "OpenAI key for the LLM labeler; unset: the rule-based labeler"
    )
    openai_base_url: str | None = shared("STASH_OPENAI_BASE_URL", None, "OpenAI-compatible API base URL override")
    step_label_model: str = shared("STASH_STEP_LABEL_MODEL", "gpt-6-sol", "the model that labels chunks")
    step_labeling_max_chunks: int = Field(
        80, ge=1, validation_alias="STASH_STEP_LABELING_MAX_CHUNKS", description="chunks per labeling window"
    )
    step_labeling_max_chars: int = Field(
        200_000, ge=5600, validation_alias="STASH_STEP_LABELING_MAX_CHARS", description="characters per window"
    )
    grading_model: str | None = shared(
        "STASH_GRADING_MODEL", None, "model for the optional quality checks; unset: no quality checks"
    )
    grading_api_key: str | None = shared("STASH_GRADING_API_KEY", None, "key of the grading model's API")
    grading_base_url: str | None = shared("STASH_GRADING_BASE_URL", None, "OpenAI-compatible URL of the grading API")
    evaluation_processes: int = Field(
        1,
        ge=1,
        le=32,
        description="processes evaluating queued revisions side by side (rule labelling uses one core per process)",
    )
    sweep_interval_s: float = Field(30.0, gt=0, description="seconds between sweeps for missed revisions")
    lease_s: float = Field(
        6.0, gt=0, description="seconds a running evaluation stays claimed without its worker renewing it"
    )
    prm_config: PRMConfig = shared(
        "STASH_PRM_CONFIG",
        PRMConfig(),
        'trajectory PRM settings as JSON, e.g. {"strategy": "rules+ml", "ml_threshold": 0.7, "ml_min_events": 3}',
    )
    anthropic_api_key: str | None = shared(
        "STASH_ANTHROPIC_API_KEY", None, "Anthropic key for section summaries and completion; unset: unavailable"
    )
    anthropic_base_url: str | None = shared("STASH_ANTHROPIC_BASE_URL", None, "Anthropic API base URL override")
    fast_model: str = shared("STASH_FAST_MODEL", "claude-haiku-4-5", "the fast Anthropic model for assessments")
    prm_model: str | None = shared(
        "STASH_PRM_MODEL", None, "model of the PRM's LLM classifier (default: the label model)"
    )
