"""Settings shared by every service, and `load()`, which reports missing values by variable name.

Each service defines one `<Service>Settings(ServiceSettings)` with `env_prefix="STASH_<SERVICE>_"`.
Defaults are the embedded profile: one machine, a SQLite file and a local artifact directory
under `STASH_DATA_DIR`. With `STASH_PROFILE=cluster`, every field marked `cluster_required`
must be set, and a missing one raises `ConfigError` naming the environment variable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from stash_common.errors import ConfigError

Profile = Literal["embedded", "cluster"]

SERVICE_NAMES: tuple[str, ...] = ("gateway", "ingest", "labeler", "trainer", "scorer", "gepa")
DEFAULT_GRPC_PORTS: dict[str, int] = {
    "ingest": 50051,
    "labeler": 50052,
    "trainer": 50053,
    "scorer": 50054,
    "gepa": 50055,
}
DEFAULT_GATEWAY_PORT = 8000
DEFAULT_OTLP_GRPC_PORT = 4317  # the gateway's OTLP/gRPC receiver, the OpenTelemetry default

_CLUSTER_REQUIRED = "cluster_required"


def cluster_required(env: str, description: str) -> Any:
    """A field that may stay unset in the embedded profile but must be set in the cluster one."""
    return Field(
        None,
        validation_alias=env,
        description=description,
        # None is a placeholder, not a value: the profile check below fills it in or refuses to start, so a field
        # can be typed as it is once loaded (`database_url: str`).
        validate_default=False,
        json_schema_extra={_CLUSTER_REQUIRED: True, "env": env},
    )


def shared(env: str, default: Any, description: str) -> Any:
    """A field every service reads from the same variable, outside its own prefix."""
    return Field(default, validation_alias=env, description=description, json_schema_extra={"env": env})


def peer_address(peer: str, description: str) -> Any:
    """A peer's `host:port` (`STASH_<PEER>_ADDRESS`); unset, it is filled in from the peer's configured port."""
    env = f"STASH_{peer.upper()}_ADDRESS"
    # None is a placeholder, as in `cluster_required`: `_fill_peer_addresses` replaces it once the ports are read.
    return Field(
        None, validation_alias=env, description=description, validate_default=False, json_schema_extra={"env": env}
    )


def default_data_dir() -> Path:
    """Where the embedded profile keeps its database files and artifacts."""
    return Path.cwd() / ".stash"


def service_config(service: str) -> SettingsConfigDict:
    """The pydantic-settings configuration of one service: its `STASH_<SERVICE>_` prefix."""
    return SettingsConfigDict(env_prefix=f"STASH_{service.upper()}_", extra="ignore", populate_by_name=True)


class ServiceSettings(BaseSettings):
    """What every service reads: the profile, the data directory, and where its peers listen."""

    service: ClassVar[str]

    profile: Profile = shared("STASH_PROFILE", "embedded", "embedded (one machine) or cluster")
    data_dir: Path = Field(
        default_factory=default_data_dir,
        validation_alias="STASH_DATA_DIR",
        description="directory for the embedded profile's files",
        json_schema_extra={"env": "STASH_DATA_DIR"},
    )
    log_level: str = shared("STASH_LOG_LEVEL", "INFO", "minimum level of structured logs")
    # A peer's address defaults to this machine at the peer's configured port (`STASH_<PEER>_PORT`),
    # so a service started with only the ports set reaches the peers where they listen.
    ingest_address: str = peer_address("ingest", "host:port of ingest")
    labeler_address: str = peer_address("labeler", "host:port of the labeler")
    trainer_address: str = peer_address("trainer", "host:port of the trainer")
    scorer_address: str = peer_address("scorer", "host:port of the scorer")
    gepa_address: str = peer_address("gepa", "host:port of GEPA")
    ingest_port: int = shared("STASH_INGEST_PORT", DEFAULT_GRPC_PORTS["ingest"], "gRPC port of ingest")
    labeler_port: int = shared("STASH_LABELER_PORT", DEFAULT_GRPC_PORTS["labeler"], "gRPC port of the labeler")
    trainer_port: int = shared("STASH_TRAINER_PORT", DEFAULT_GRPC_PORTS["trainer"], "gRPC port of the trainer")
    scorer_port: int = shared("STASH_SCORER_PORT", DEFAULT_GRPC_PORTS["scorer"], "gRPC port of the scorer")
    gepa_port: int = shared("STASH_GEPA_PORT", DEFAULT_GRPC_PORTS["gepa"], "gRPC port of GEPA")
    host: str = shared("STASH_LISTEN_HOST", "127.0.0.1", "interface the servers listen on (0.0.0.0 in a pod)")
    stack_id: str = shared(
        "STASH_STACK_ID", "", "the stack this service belongs to (`up` sets it; the chart: the release's name)"
    )

    @model_validator(mode="after")
    def _fill_peer_addresses(self) -> ServiceSettings:
        for peer in DEFAULT_GRPC_PORTS:
            if getattr(self, f"{peer}_address") is None:
                setattr(self, f"{peer}_address", f"127.0.0.1:{getattr(self, f'{peer}_port')}")
        return self

    @model_validator(mode="after")
    def _fill_profile_defaults(self) -> ServiceSettings:
        missing = []
        for name, field in type(self).model_fields.items():
            extra = field.json_schema_extra
            if not isinstance(extra, dict) or not extra.get(_CLUSTER_REQUIRED) or getattr(self, name) is not None:
                continue
            if self.profile == "cluster":
                missing.append(f"{extra['env']} is not set ({field.description})")
            else:
                setattr(self, name, self.embedded_default(name))
        if missing:
            # Not a ValueError: pydantic passes it through unwrapped, message intact.
            raise ConfigError("; ".join(missing) + " — required when STASH_PROFILE=cluster")
        return self

    def embedded_default(self, field: str) -> Any:
        """The embedded-profile value of a cluster-required field (None: use the in-process backend)."""
        if field == "database_url":
            return f"sqlite:///{self.data_dir / (self.service + '.db')}"
        return None

    def address_of(self, service: str) -> str:
        """host:port where a peer service's gRPC server listens."""
        address: str = getattr(self, f"{service}_address")
        return address


S = TypeVar("S", bound=BaseSettings)


def env_name(settings_cls: type[BaseSettings], loc: str) -> str:
    """The environment variable behind a validation error's location (a field name or an alias)."""
    for name, info in settings_cls.model_fields.items():
        if loc in (name, info.validation_alias):
            if isinstance(info.validation_alias, str):
                return info.validation_alias
            return f"{settings_cls.model_config.get('env_prefix', '')}{name}".upper()
    return loc.upper()


def _description(settings_cls: type[BaseSettings], loc: str) -> str:
    for name, info in settings_cls.model_fields.items():
        if loc in (name, info.validation_alias) and info.description:
            return f" ({info.description})"
    return ""


def load(settings_cls: type[S], **overrides: Any) -> S:
    """Read `settings_cls` from the environment; report problems by environment variable.

    Pydantic alone names only the field (`database_url … Field required`); this names
    the variable and says what the value is for.
    """
    try:
        return settings_cls(**overrides)
    except ValidationError as error:
        problems: dict[str, str] = {}  # by variable: a service's own port is also its peers' port field
        for item in error.errors():
            loc = str(item["loc"][0]) if item["loc"] else ""
            problem = "is not set" if item["type"] == "missing" else f"is invalid: {item['msg']}"
            env = env_name(settings_cls, loc)
            problems.setdefault(env, f"{env} {problem}{_description(settings_cls, loc)}")
        raise ConfigError("; ".join(problems.values())) from None
