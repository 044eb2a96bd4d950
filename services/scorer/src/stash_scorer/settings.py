"""ScorerSettings: where the scorer service listens and what it connects to."""

from __future__ import annotations

from typing import ClassVar

from stash_common.settings import DEFAULT_GRPC_PORTS, ServiceSettings, service_config


class ScorerSettings(ServiceSettings):
    """Settings of the scorer service (`STASH_SCORER_*`)."""

    service: ClassVar[str] = "scorer"
    model_config = service_config("scorer")

    port: int = DEFAULT_GRPC_PORTS["scorer"]
