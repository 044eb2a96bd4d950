"""The gateway's deadlines come from STASH_GATEWAY_* variables, with the embedded profile's defaults."""

from pathlib import Path

import pytest

from stash_common.settings import load
from stash_gateway.settings import GatewaySettings


def test_deadlines_default_to_the_embedded_profile(tmp_path: Path) -> None:
    settings = load(GatewaySettings, data_dir=tmp_path)

    assert (settings.rpc_timeout_s, settings.evaluation_timeout_s, settings.import_timeout_s) == (30.0, 10.0, 600.0)
    assert (settings.otlp_timeout_s, settings.export_timeout_s, settings.health_timeout_s) == (120.0, 3600.0, 2.0)
    assert (settings.shutdown_grace_s, settings.score_timeout_s, settings.keep_alive_s) == (10, 10.0, 75)


def test_a_deadline_is_read_from_its_variable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("STASH_GATEWAY_RPC_TIMEOUT_S", "5")
    monkeypatch.setenv("STASH_GATEWAY_EXPORT_TIMEOUT_S", "60")

    settings = load(GatewaySettings, data_dir=tmp_path)

    assert (settings.rpc_timeout_s, settings.export_timeout_s) == (5.0, 60.0)
