"""IngestSettings: where the ingest service listens and what it connects to."""

from __future__ import annotations

from typing import ClassVar

from stash_common.settings import DEFAULT_GRPC_PORTS, ServiceSettings, service_config


class IngestSettings(ServiceSettings):
    """Settings of the ingest service (`STASH_INGEST_*`)."""

    service: ClassVar[str] = "ingest"
    model_config = service_config("ingest")

    port: int = DEFAULT_GRPC_PORTS["ingest"]
