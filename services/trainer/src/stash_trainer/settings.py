"""TrainerSettings: where the trainer service listens and what it connects to."""

from __future__ import annotations

from typing import ClassVar

from stash_common.settings import DEFAULT_GRPC_PORTS, ServiceSettings, service_config


class TrainerSettings(ServiceSettings):
    """Settings of the trainer service (`STASH_TRAINER_*`)."""

    service: ClassVar[str] = "trainer"
    model_config = service_config("trainer")

    port: int = DEFAULT_GRPC_PORTS["trainer"]
