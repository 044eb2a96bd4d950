"""Users and API keys through the gateway's admin routes, authorised by its admin key.

Only the gateway writes its tables; the CLI is one more HTTP client, so the account commands
work the same against a laptop and a cluster. The admin key comes from `STASH_ADMIN_KEY` (or
--admin-key); in the embedded profile, without it, from the file the local gateway created in
the data directory at start.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from stash_cli.client import ApiClient
from stash_cli.settings import CliSettings
from stash_common.errors import ConfigError
from stash_common.storage import ADMIN_KEY_FILE

ADMIN_PREFIX = "/api/v1/admin"


def read_admin_key(settings: CliSettings) -> str:
    """The admin key: configured, else (embedded profile only) the local gateway's file."""
    if settings.admin_key:
        return settings.admin_key
    if settings.profile == "cluster":
        raise ConfigError(
            "STASH_ADMIN_KEY is not set (the gateway's admin key, the value its operator gave "
            "STASH_GATEWAY_ADMIN_KEY); or pass --admin-key"
        )
    path = settings.data_dir / ADMIN_KEY_FILE
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        raise ConfigError(
            f"no admin key at {path}: start the local stack with `stash-rm up` (its gateway creates the key), "
            "or set STASH_ADMIN_KEY"
        ) from None
    except OSError as error:
        raise ConfigError(f"cannot read the admin key at {path}: {error}") from None


class AdminClient(ApiClient):
    """Calls to `/api/v1/admin` with the gateway's admin key."""

    def __init__(self, url: str, secret: str, timeout_s: float = 30.0) -> None:
        super().__init__(url, ADMIN_PREFIX, secret, timeout_s)

    def create_user(self, name: str) -> dict[str, Any]:
        """A new user with its first full-access key (`key.key`, shown once)."""
        return self.call_object("POST", "/users", json={"name": name})

    def create_key(self, user: str, name: str, read_only: bool) -> dict[str, Any]:
        """A new key (`key`, shown once) for the user with this name or id."""
        return self.call_object("POST", f"/users/{_segment(user)}/keys", json={"name": name, "read_only": read_only})

    def switch_reward_models(self, user: str, enabled: bool) -> dict[str, Any]:
        """Enable or disable the reward-model API for the user with this name or id."""
        return self.call_object("PATCH", f"/users/{_segment(user)}", json={"reward_models_enabled": enabled})


def _segment(user: str) -> str:
    # A user name may hold any character; quoted, `/`, `?` and `#` reach the gateway as part of the name.
    return quote(user, safe="")
