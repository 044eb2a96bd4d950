"""IngestSettings: where the ingest service listens, its database, limits and the title model."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from stash_common.settings import DEFAULT_GRPC_PORTS, ServiceSettings, cluster_required, service_config, shared
from stash_ingest.limits import DEFAULT_LIMITS as _LIMITS
from stash_ingest.limits import TraceLimits


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
        30.0,
        ge=0,
        description="seconds a change waits before the labeler's and the scorer's sweeps may list it "
        "(a scorer backfill lists it at once)",
    )
    # What one import and one trace may hold (docs/api.md: Limits).
    max_traces_per_import: int = Field(_LIMITS.traces_per_import, ge=1, description="traces one import may hold (413)")
    max_steps_per_trace: int = Field(_LIMITS.steps_per_trace, ge=1, description="steps one trace may hold (422)")
    max_spans_per_trace: int = Field(_LIMITS.spans_per_trace, ge=1, description="spans one trace may hold (422)")
    max_string_chars: int = Field(_LIMITS.string_chars, ge=1, description="characters of one content or name (422)")
    max_tool_input_bytes: int = Field(_LIMITS.tool_input_bytes, ge=1, description="bytes of one tool input as JSON")
    max_json_bytes: int = Field(_LIMITS.json_bytes, ge=1, description="bytes of one metadata or span value as JSON")
    max_trace_bytes: int = Field(_LIMITS.trace_bytes, ge=1, description="bytes of text and JSON in one trace (422)")

    @property
    def limits(self) -> TraceLimits:
        """The configured limits of imports and traces."""
        return TraceLimits(
            traces_per_import=self.max_traces_per_import,
            steps_per_trace=self.max_steps_per_trace,
            spans_per_trace=self.max_spans_per_trace,
            string_chars=self.max_string_chars,
            tool_input_bytes=self.max_tool_input_bytes,
            json_bytes=self.max_json_bytes,
            trace_bytes=self.max_trace_bytes,
        )
