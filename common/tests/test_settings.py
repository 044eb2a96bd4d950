"""Settings: embedded defaults, cluster requirements, and errors that name the variable."""

from pathlib import Path

import pytest

from stash_common.errors import ConfigError
from stash_common.settings import load
from stash_gateway.settings import GatewaySettings
from stash_ingest.settings import IngestSettings

PEER_VARIABLES = [f"STASH_{peer}_{kind}" for peer in ("INGEST", "LABELER", "GEPA") for kind in ("PORT", "ADDRESS")]


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("STASH_PROFILE", "STASH_GATEWAY_DATABASE_URL", "STASH_S3_BUCKET", *PEER_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("STASH_DATA_DIR", str(tmp_path))


def test_database_url_defaults_to_sqlite_in_data_dir_when_embedded(tmp_path: Path) -> None:
    settings = load(GatewaySettings)

    assert settings.profile == "embedded"
    assert settings.database_url == f"sqlite:///{tmp_path / 'gateway.db'}"


def test_load_names_the_variable_when_cluster_profile_lacks_database_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STASH_PROFILE", "cluster")

    with pytest.raises(ConfigError, match="STASH_GATEWAY_DATABASE_URL is not set"):
        load(GatewaySettings)


def test_cluster_profile_uses_the_configured_database_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STASH_PROFILE", "cluster")
    monkeypatch.setenv("STASH_GATEWAY_DATABASE_URL", "postgresql://db/stash")
    monkeypatch.setenv("STASH_GATEWAY_REDIS_URL", "redis://redis:6379/0")

    settings = load(GatewaySettings)

    assert (settings.database_url, settings.redis_url) == ("postgresql://db/stash", "redis://redis:6379/0")


def test_load_names_the_variable_when_a_value_is_invalid(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STASH_INGEST_PORT", "not-a-port")

    with pytest.raises(ConfigError, match="STASH_INGEST_PORT is invalid"):
        load(IngestSettings)


def test_load_names_the_shared_variable_when_profile_is_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STASH_PROFILE", "cloud")

    with pytest.raises(ConfigError, match="STASH_PROFILE is invalid"):
        load(IngestSettings)


def test_service_prefix_sets_the_port(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STASH_INGEST_PORT", "6001")

    assert load(IngestSettings).port == 6001


def test_peer_addresses_follow_the_configured_ports(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STASH_LABELER_PORT", "6002")
    monkeypatch.setenv("STASH_INGEST_PORT", "6001")

    assert load(IngestSettings).address_of("labeler") == "127.0.0.1:6002"
    assert load(GatewaySettings).address_of("ingest") == "127.0.0.1:6001"
    assert load(GatewaySettings).address_of("gepa") == "127.0.0.1:50055"


def test_an_explicit_peer_address_wins_over_the_port(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STASH_LABELER_PORT", "6002")
    monkeypatch.setenv("STASH_LABELER_ADDRESS", "labeler.internal:7002")

    assert load(IngestSettings).address_of("labeler") == "labeler.internal:7002"
