"""LabelerSettings: where the labeler service listens and what it connects to."""

from __future__ import annotations

from typing import ClassVar

from stash_common.settings import DEFAULT_GRPC_PORTS, ServiceSettings, service_config


class LabelerSettings(ServiceSettings):
    """Settings of the labeler service (`STASH_LABELER_*`)."""

    service: ClassVar[str] = "labeler"
    model_config = service_config("labeler")

    port: int = DEFAULT_GRPC_PORTS["labeler"]
