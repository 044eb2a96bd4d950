"""GepaSettings: where the gepa service listens and what it connects to."""

from __future__ import annotations

from typing import ClassVar

from stash_common.settings import DEFAULT_GRPC_PORTS, ServiceSettings, service_config


class GepaSettings(ServiceSettings):
    """Settings of the gepa service (`STASH_GEPA_*`)."""

    service: ClassVar[str] = "gepa"
    model_config = service_config("gepa")

    port: int = DEFAULT_GRPC_PORTS["gepa"]
