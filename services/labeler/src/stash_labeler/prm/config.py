"""PRMConfig: which detectors run and how far the LLM classifier is trusted."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Strategy = Literal["rules", "rules+ml"]


class PRMConfig(BaseModel):
    """The trajectory PRM's settings; the default makes no LLM calls."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    strategy: Strategy = Field(
        default="rules",
        description='"rules": the five rule detectors only; "rules+ml": the rules first, then the LLM classifier',
    )
    ml_threshold: float = Field(
        default=0.7, ge=0.0, le=1.0, description="Confidence below which an LLM-found pattern is dropped"
    )
    ml_min_events: int = Field(
        default=3, ge=1, description="The LLM classifier is not called for trajectories with fewer events"
    )
