"""The command line without a running stack: configuration errors, unknown names, the import boundary."""

import os
import subprocess
import sys
from pathlib import Path

from support.processes import free_port, stash_rm


def test_serve_names_the_missing_variable_in_cluster_profile(tmp_path: Path) -> None:
    env = {**os.environ, "STASH_PROFILE": "cluster", "STASH_DATA_DIR": str(tmp_path)}
    env.pop("STASH_GATEWAY_DATABASE_URL", None)

    result = stash_rm("serve", "gateway", env=env)

    assert result.returncode == 1
    assert result.stderr.startswith("error: STASH_GATEWAY_DATABASE_URL is not set"), result.stderr
    assert "Traceback" not in result.stderr


def test_serve_names_the_invalid_port_variable(tmp_path: Path) -> None:
    env = {**os.environ, "STASH_INGEST_PORT": "eighty", "STASH_DATA_DIR": str(tmp_path)}

    result = stash_rm("serve", "ingest", env=env)

    assert result.returncode == 1
    assert "STASH_INGEST_PORT is invalid" in result.stderr
    assert "Traceback" not in result.stderr


def test_serve_lists_the_services_for_an_unknown_name() -> None:
    result = stash_rm("serve", "billing")

    assert result.returncode == 1
    assert "gateway, ingest, labeler, trainer, scorer, gepa" in result.stderr


def test_account_command_before_the_stack_ever_started_says_to_start_it(tmp_path: Path) -> None:
    result = stash_rm("keys", "create", "nobody", "--data-dir", str(tmp_path))

    assert result.returncode == 1
    assert "no admin key" in result.stderr and "stash-rm up" in result.stderr


def test_account_command_without_a_running_gateway_says_to_start_it(tmp_path: Path) -> None:
    port = str(free_port())
    env = {**os.environ, "STASH_DATA_DIR": str(tmp_path), "STASH_ADMIN_KEY": "a-key", "STASH_GATEWAY_PORT": port}

    result = stash_rm("users", "create", "alice", env=env)

    assert result.returncode == 1
    assert f"cannot reach the gateway at http://127.0.0.1:{port}" in result.stderr
    assert "stash-rm up" in result.stderr


def test_account_command_in_cluster_profile_names_the_admin_key_variable(tmp_path: Path) -> None:
    env = {**os.environ, "STASH_PROFILE": "cluster", "STASH_DATA_DIR": str(tmp_path)}
    env.pop("STASH_ADMIN_KEY", None)

    result = stash_rm("users", "disable", "alice", env=env)

    assert result.returncode == 1
    assert "STASH_ADMIN_KEY is not set" in result.stderr


def test_gateway_process_never_loads_torch(tmp_path: Path) -> None:
    probe = (
        "import sys\n"
        "from fastapi.testclient import TestClient\n"
        "from stash_common.settings import load\n"
        "import stash_gateway.main\n"
        "from stash_gateway.app import create_app\n"
        "from stash_gateway.settings import GatewaySettings\n"
        "with TestClient(create_app(load(GatewaySettings))) as client:\n"
        "    client.get('/docs')\n"
        "heavy = sorted(m for m in ('torch', 'transformers') if m in sys.modules)\n"
        "print('heavy:', heavy)\n"
    )
    env = {**os.environ, "STASH_DATA_DIR": str(tmp_path), "STASH_GATEWAY_OTLP_GRPC_PORT": "0"}

    result = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)

    assert result.returncode == 0, result.stderr
    assert "heavy: []" in result.stdout
