"""Bearer authentication, key scopes, metrics and docs of the gateway app on PostgreSQL."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from stash_common.db import make_engine, make_sessions, transaction, upgrade
from stash_common.settings import load
from stash_gateway.app import create_app
from stash_gateway.settings import GatewaySettings
from stash_gateway.store import MIGRATIONS_DIR, create_key, create_user
from support.processes import GRPC_SERVICES, refused_addresses


@pytest.fixture
def settings(postgres_url: str, tmp_path: Path) -> Iterator[GatewaySettings]:
    upgrade("gateway", MIGRATIONS_DIR, postgres_url)
    # Peers that are down for sure: a stack elsewhere on this machine may serve the default ports.
    with refused_addresses(len(GRPC_SERVICES)) as addresses:
        peers = {f"{name}_address": address for name, address in zip(GRPC_SERVICES, addresses, strict=True)}
        yield load(GatewaySettings, database_url=postgres_url, data_dir=tmp_path, otlp_grpc_port=0, **peers)


@pytest.fixture
def client(settings: GatewaySettings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as client:
        yield client


def _user_with_keys(settings: GatewaySettings, name: str) -> tuple[str, str, str]:
    """(user id, full-access key, read-only key)."""
    sessions = make_sessions(make_engine(settings.database_url))
    with transaction(sessions) as session:
        user = create_user(session, name)
        _, full = create_key(session, user.id, "full", read_only=False)
        _, read = create_key(session, user.id, "read", read_only=True)
    return user.id, full, read


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_request_without_key_gets_401(client: TestClient) -> None:
    response = client.get("/api/v1/rm/me")

    assert response.status_code == 401
    assert "missing API key" in response.json()["detail"]
    assert response.headers["WWW-Authenticate"] == "Bearer"


def test_request_with_unknown_key_gets_401(client: TestClient) -> None:
    response = client.get("/api/v1/rm/me", headers=_bearer("srm_not-a-real-key"))

    assert response.status_code == 401


def test_me_names_the_caller_behind_the_key(client: TestClient, settings: GatewaySettings) -> None:
    user_id, full, read = _user_with_keys(settings, "alice")

    assert client.get("/api/v1/rm/me", headers=_bearer(full)).json()["user_id"] == user_id
    assert client.get("/api/v1/rm/me", headers=_bearer(read)).json()["read_only"] is True


def test_read_only_key_cannot_create_keys(client: TestClient, settings: GatewaySettings) -> None:
    _, _, read = _user_with_keys(settings, "bob")

    response = client.post("/api/v1/rm/keys", json={"name": "more"}, headers=_bearer(read))

    assert response.status_code == 403
    assert "read-only" in response.json()["detail"]


def test_created_key_works_and_stops_working_when_revoked(client: TestClient, settings: GatewaySettings) -> None:
    _, full, _ = _user_with_keys(settings, "carol")
    created = client.post("/api/v1/rm/keys", json={"name": "ci"}, headers=_bearer(full)).json()

    assert client.get("/api/v1/rm/me", headers=_bearer(created["key"])).status_code == 200
    assert client.delete(f"/api/v1/rm/keys/{created['id']}", headers=_bearer(full)).status_code == 204
    assert client.get("/api/v1/rm/me", headers=_bearer(created["key"])).status_code == 401


def test_keys_of_another_user_are_not_found(client: TestClient, settings: GatewaySettings) -> None:
    _, dave_key, _ = _user_with_keys(settings, "dave")
    erin_key = client.post("/api/v1/rm/keys", json={}, headers=_bearer(_user_with_keys(settings, "erin")[1])).json()

    response = client.delete(f"/api/v1/rm/keys/{erin_key['id']}", headers=_bearer(dave_key))

    assert response.status_code == 404
    assert erin_key["id"] not in {key["id"] for key in client.get("/api/v1/rm/keys", headers=_bearer(dave_key)).json()}


def test_only_digests_of_keys_are_stored(settings: GatewaySettings, postgres_url: str) -> None:
    _, full, _ = _user_with_keys(settings, "frank")

    engine = make_engine(postgres_url)
    with engine.connect() as connection:
        stored = connection.exec_driver_sql("SELECT key_digest FROM api_keys").scalars().all()
    engine.dispose()
    assert full not in stored and all(len(value) == 64 for value in stored)


def test_healthz_names_every_service_that_is_down(client: TestClient) -> None:
    response = client.get("/healthz")

    assert response.status_code == 503
    for name in ("ingest", "labeler", "trainer", "scorer", "gepa"):
        assert f"{name} is UNREACHABLE" in response.json()["detail"]


def test_metrics_count_requests_by_route(client: TestClient) -> None:
    client.get("/api/v1/rm/me")

    text = client.get("/metrics").text

    assert 'stash_http_requests_total{method="GET",route="/api/v1/rm/me",status="401"} 1.0' in text


def test_openapi_documents_bearer_auth(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()

    assert "/api/v1/rm/me" in schema["paths"]
    assert schema["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    assert client.get("/docs").status_code == 200
