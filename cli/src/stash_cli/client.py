"""A small REST client of the gateway for the command line (imports, session uploads)."""

from __future__ import annotations

from typing import Any

import httpx
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from stash_common.errors import ConfigError


class ClientSettings(BaseSettings):
    """Where the gateway is and which key to use (`STASH_URL`, `STASH_API_KEY`)."""

    model_config = SettingsConfigDict(env_prefix="STASH_", extra="ignore")

    url: str = Field("http://127.0.0.1:8000", description="the gateway's base URL")
    api_key: str | None = Field(None, description="an API key from `stash-rm users create` or `keys create`")


class ApiError(Exception):
    """The gateway refused a request; the message carries its status and reason."""


class GatewayClient:
    """Authenticated calls to `/api/v1/rm`."""

    def __init__(self, url: str, api_key: str | None, timeout_s: float = 600.0) -> None:
        if not api_key:
            raise ConfigError("STASH_API_KEY is not set (an API key from `stash-rm users create`); or pass --key")
        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {api_key}"}
        self.http = httpx.Client(base_url=self.url + "/api/v1/rm", headers=headers, timeout=timeout_s)

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        """The JSON answer, or ApiError naming the status and the gateway's reason."""
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.TransportError as error:
            raise ApiError(f"cannot reach the gateway at {self.http.base_url}: {error}") from None
        if response.is_error:
            raise ApiError(f"HTTP {response.status_code}: {_reason(response)}")
        return response.json() if response.content else None

    def health(self) -> dict[str, Any]:
        """The gateway's /healthz answer (200 or 503 alike)."""
        return self.http.get(f"{self.url}/healthz").json()

    def import_traces(self, data: str, format_name: str = "auto", source_id: str | None = None) -> dict[str, Any]:
        """POST /traces/import."""
        body = {"format": format_name, "data": data, "source_id": source_id}
        return self.call("POST", "/traces/import", json=body)

    def close(self) -> None:
        """Close the connection pool."""
        self.http.close()


def _reason(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:500]
    return str(body.get("detail", body)) if isinstance(body, dict) else str(body)
