"""Small REST clients of the gateway for the command line: one transport, one error type.

The CLI reaches services only through the gateway's HTTP API; every refusal becomes an
`ApiError` that names the HTTP status and the gateway's reason, and a gateway that does not
answer becomes one that says how to start it.
"""

from __future__ import annotations

from typing import Any

import httpx

from stash_common.errors import ConfigError

RM_PREFIX = "/api/v1/rm"
TRANSCRIPTS_PATH = "/api/v1/me/transcripts"


class ApiError(Exception):
    """The gateway refused a request (or did not answer: `status_code` is None)."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


def json_object(response: httpx.Response) -> dict[str, Any]:
    """The response's JSON body, which the gateway's contract makes an object."""
    body = response.json()
    if not isinstance(body, dict):
        raise ApiError(f"the gateway answered {type(body).__name__} where an object was expected")
    return body


class ApiClient:
    """JSON calls under one prefix of the gateway, with a bearer credential."""

    def __init__(self, url: str, prefix: str, secret: str, timeout_s: float) -> None:
        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {secret}"}
        self.http = httpx.Client(base_url=self.url + prefix, headers=headers, timeout=timeout_s)

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        """The JSON answer, or ApiError naming the status and the gateway's reason."""
        response = self._request(method, path, **kwargs)
        return response.json() if response.content else None

    def call_object(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """`call` for routes that answer a JSON object."""
        return json_object(self._request(method, path, **kwargs))

    def text(self, path: str) -> str:
        """The text of a GET (a download), or ApiError naming the status and the gateway's reason."""
        return self._request("GET", path).text

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        response = self._send(method, path, **kwargs)
        if response.is_error:
            raise ApiError(f"HTTP {response.status_code}: {_reason(response)}", response.status_code)
        return response

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """The gateway's answer, whatever its status; ApiError when it does not answer."""
        try:
            return self.http.request(method, path, **kwargs)
        except httpx.TransportError as error:
            raise ApiError(
                f"cannot reach the gateway at {self.url} ({error}); start it with `stash-rm up`, "
                "or point STASH_URL (--url) at a running one"
            ) from None

    def close(self) -> None:
        """Close the connection pool."""
        self.http.close()


class GatewayClient(ApiClient):
    """Calls to `/api/v1/rm` with a user's API key."""

    def __init__(self, url: str, api_key: str | None, timeout_s: float = 600.0) -> None:
        if not api_key:
            raise ConfigError("STASH_API_KEY is not set (an API key from `stash-rm users create`); or pass --key")
        super().__init__(url, RM_PREFIX, api_key, timeout_s)

    def health(self) -> dict[str, Any]:
        """The gateway's /healthz answer (200 or 503 alike); ApiError when it does not answer."""
        return json_object(self._send("GET", f"{self.url}/healthz"))

    def import_traces(self, data: str, format_name: str = "auto", source_id: str | None = None) -> dict[str, Any]:
        """POST /traces/import."""
        body = {"format": format_name, "data": data, "source_id": source_id}
        return self.call_object("POST", "/traces/import", json=body)

    def upload_transcript(self, data: bytes, agent: str = "auto") -> dict[str, Any]:
        """POST /api/v1/me/transcripts: `{agent, trace_id, external_id, result}`."""
        headers = {"Content-Type": "application/x-ndjson"}
        url = f"{self.url}{TRANSCRIPTS_PATH}"
        return json_object(self._request("POST", url, content=data, params={"agent": agent}, headers=headers))

    def query(self, sql: str) -> dict[str, Any]:
        """POST /query: `{columns, rows, truncated}`."""
        return self.call_object("POST", "/query", json={"sql": sql})


def _reason(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:500]
    return str(body.get("detail", body)) if isinstance(body, dict) else str(body)
