"""Account commands end to end: `stash-rm users|keys` through the admin routes of a real embedded gateway."""

import stat
from pathlib import Path

import httpx
import pytest

from support.processes import stash_rm
from support.stack import RunningStack


@pytest.fixture(scope="module")
def stack(embedded_stack: RunningStack) -> RunningStack:
    return embedded_stack


def test_embedded_gateway_keeps_its_admin_key_private_in_the_data_dir(stack: RunningStack) -> None:
    key_file = stack.data_dir / "admin.key"

    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert len(key_file.read_text().strip()) == 64


def test_wrong_admin_key_is_refused_and_creates_nothing(stack: RunningStack) -> None:
    refused = stash_rm("users", "create", "erin", env={**stack.env, "STASH_ADMIN_KEY": "not-the-admin-key"})
    created = stash_rm("users", "create", "erin", env=stack.env)

    assert refused.returncode == 1
    assert "HTTP 401" in refused.stderr and "invalid admin key" in refused.stderr
    assert created.returncode == 0, created.stderr


def test_admin_key_option_wins_over_the_data_dir(stack: RunningStack, tmp_path: Path) -> None:
    secret = (stack.data_dir / "admin.key").read_text().strip()
    env = {**stack.env, "STASH_DATA_DIR": str(tmp_path)}

    result = stash_rm("users", "create", "grace", "--admin-key", secret, env=env)

    assert result.returncode == 0, result.stderr


def test_unknown_user_is_404_and_says_how_to_create_one(stack: RunningStack) -> None:
    key = stash_rm("keys", "create", "nobody", env=stack.env)
    switch = stash_rm("users", "disable", "nobody", env=stack.env)

    assert key.returncode == switch.returncode == 1
    assert "HTTP 404" in key.stderr and "stash-rm users create" in key.stderr
    assert "HTTP 404" in switch.stderr


def test_duplicate_user_name_is_409(stack: RunningStack) -> None:
    stack.create_user("frank")

    again = stash_rm("users", "create", "frank", env=stack.env)

    assert again.returncode == 1
    assert "HTTP 409" in again.stderr and "already exists" in again.stderr


def test_user_named_with_a_slash_gets_keys_by_name(stack: RunningStack) -> None:
    stack.create_user("team/a b")

    created = stash_rm("keys", "create", "team/a b", "--read-only", env=stack.env)
    key = created.stdout.split("shown once): ")[1].split()[0]

    me = httpx.get(f"{stack.api_url}/me", headers={"Authorization": f"Bearer {key}"}).json()
    assert (me["user_name"], me["read_only"]) == ("team/a b", True)
