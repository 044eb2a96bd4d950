"""The admin routes of the gateway app on PostgreSQL: the admin key, its profiles, and what it may do."""

import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from stash_common.db import upgrade
from stash_common.settings import load
from stash_gateway.app import create_app
from stash_gateway.settings import GatewaySettings
from stash_gateway.store import MIGRATIONS_DIR

ADMIN_KEY = "operator-secret-from-a-kubernetes-secret"


def _client(postgres_url: str, tmp_path: Path, **settings: Any) -> TestClient:
    upgrade("gateway", MIGRATIONS_DIR, postgres_url)
    return TestClient(
        create_app(load(GatewaySettings, database_url=postgres_url, data_dir=tmp_path, otlp_grpc_port=0, **settings))
    )


@pytest.fixture
def cluster(postgres_url: str, redis_url: str, tmp_path: Path) -> Iterator[TestClient]:
    with _client(postgres_url, tmp_path, profile="cluster", admin_key=ADMIN_KEY, redis_url=redis_url) as client:
        yield client


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_cluster_profile_without_admin_key_disables_the_admin_routes(
    postgres_url: str, redis_url: str, tmp_path: Path
) -> None:
    with _client(postgres_url, tmp_path, profile="cluster", redis_url=redis_url) as client:
        response = client.post("/api/v1/admin/users", json={"name": "alice"}, headers=_bearer("anything"))

    assert response.status_code == 403
    assert "STASH_GATEWAY_ADMIN_KEY" in response.json()["detail"]
    assert not (tmp_path / "admin.key").exists()


def test_embedded_profile_creates_a_private_admin_key_that_authorises(postgres_url: str, tmp_path: Path) -> None:
    with _client(postgres_url, tmp_path) as client:
        key_file = tmp_path / "admin.key"
        response = client.post("/api/v1/admin/users", json={"name": "alice"}, headers=_bearer(key_file.read_text()))

    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert response.status_code == 201


def test_configured_admin_key_wins_over_the_data_directory(postgres_url: str, tmp_path: Path) -> None:
    with _client(postgres_url, tmp_path, admin_key=ADMIN_KEY) as client:
        response = client.post("/api/v1/admin/users", json={"name": "alice"}, headers=_bearer(ADMIN_KEY))

    assert response.status_code == 201
    assert not (tmp_path / "admin.key").exists()


def test_wrong_or_missing_admin_key_gets_401_and_creates_nothing(cluster: TestClient) -> None:
    wrong = cluster.post("/api/v1/admin/users", json={"name": "alice"}, headers=_bearer(ADMIN_KEY + "x"))
    missing = cluster.post("/api/v1/admin/users", json={"name": "alice"})
    created = cluster.post("/api/v1/admin/users", json={"name": "alice"}, headers=_bearer(ADMIN_KEY))

    assert wrong.status_code == 401 and "invalid admin key" in wrong.json()["detail"]
    assert missing.status_code == 401 and "missing admin key" in missing.json()["detail"]
    assert created.status_code == 201


def test_an_api_key_is_not_an_admin_key(cluster: TestClient) -> None:
    user_key = cluster.post("/api/v1/admin/users", json={"name": "alice"}, headers=_bearer(ADMIN_KEY)).json()["key"]

    response = cluster.post("/api/v1/admin/users", json={"name": "bob"}, headers=_bearer(user_key["key"]))

    assert response.status_code == 401


def test_created_user_key_authenticates_and_duplicate_name_gets_409(cluster: TestClient) -> None:
    created = cluster.post("/api/v1/admin/users", json={"name": "alice"}, headers=_bearer(ADMIN_KEY)).json()
    again = cluster.post("/api/v1/admin/users", json={"name": "alice"}, headers=_bearer(ADMIN_KEY))

    me = cluster.get("/api/v1/rm/me", headers=_bearer(created["key"]["key"])).json()
    assert (me["user_name"], me["read_only"]) == ("alice", False)
    assert again.status_code == 409 and "already exists" in again.json()["detail"]


def test_keys_and_switches_address_users_by_name_or_id_and_404_for_others(cluster: TestClient) -> None:
    user = cluster.post("/api/v1/admin/users", json={"name": "team/a b"}, headers=_bearer(ADMIN_KEY)).json()

    key = cluster.post(
        "/api/v1/admin/users/team%2Fa%20b/keys", json={"name": "ci", "read_only": True}, headers=_bearer(ADMIN_KEY)
    ).json()
    disabled = cluster.patch(
        f"/api/v1/admin/users/{user['id']}", json={"reward_models_enabled": False}, headers=_bearer(ADMIN_KEY)
    )
    unknown = cluster.post("/api/v1/admin/users/nobody/keys", json={}, headers=_bearer(ADMIN_KEY))

    assert key["read_only"] is True
    assert disabled.json()["reward_models_enabled"] is False
    assert cluster.get("/api/v1/rm/me", headers=_bearer(key["key"])).status_code == 403
    assert unknown.status_code == 404 and "stash-rm users create" in unknown.json()["detail"]
