"""`stash-rm up` end to end: six processes, all SERVING, /healthz, a dead service, Ctrl-C."""

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from stash_common.storage import LocalObjectStore, load_signing_key
from support.processes import stash_rm
from support.stack import RunningStack, running_stack

SERVICES = ("ingest", "labeler", "trainer", "scorer", "gepa", "gateway")


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[RunningStack]:
    with running_stack(tmp_path) as running:
        yield running


def test_up_brings_every_service_to_serving_and_healthz_200(stack: RunningStack) -> None:
    response = httpx.get(f"{stack.gateway_url}/healthz")

    assert response.status_code == 200
    assert set(response.json()["services"].values()) == {"SERVING"}
    status = stash_rm("status", env=stack.env)
    assert status.returncode == 0, status.stdout + status.stderr
    assert status.stdout.count("SERVING") == 6


def test_healthz_names_a_killed_service_with_503(stack: RunningStack) -> None:
    os.kill(stack.pid("labeler"), signal.SIGKILL)

    deadline = time.monotonic() + 20
    while (response := httpx.get(f"{stack.gateway_url}/healthz")).status_code == 200 and time.monotonic() < deadline:
        time.sleep(0.2)

    assert response.status_code == 503
    assert "labeler" in response.json()["detail"]
    assert response.json()["services"]["ingest"] == "SERVING"
    status = stash_rm("status", env=stack.env)
    assert status.returncode == 1
    assert "UNREACHABLE" in status.stdout


def test_ctrl_c_stops_every_service(stack: RunningStack) -> None:
    pids = [stack.pid(name) for name in SERVICES]

    stack.process.send_signal(signal.SIGINT)
    output, _ = stack.process.communicate(timeout=60)

    assert stack.process.returncode == 0, output
    assert "Stopped." in output
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_local_artifact_presigned_url_downloads_over_http(stack: RunningStack) -> None:
    store = LocalObjectStore(
        stack.data_dir / "artifacts", stack.gateway_url, load_signing_key(stack.data_dir, configured=None)
    )
    store.put("models/m1/model.tar.gz", b"checkpoint bytes")

    url = store.presign("models/m1/model.tar.gz", expires_s=300)

    assert httpx.get(url).content == b"checkpoint bytes"
    assert httpx.get(url.replace("signature=", "signature=0")).status_code == 403


def test_users_and_keys_created_by_cli_authenticate(stack: RunningStack) -> None:
    created = stash_rm("users", "create", "alice", env=stack.env)
    assert created.returncode == 0, created.stderr
    full_key = created.stdout.split("shown once): ")[1].split()[0]
    read_only = stash_rm("keys", "create", "alice", "--read-only", env=stack.env)
    read_key = read_only.stdout.split("shown once): ")[1].split()[0]

    me = httpx.get(f"{stack.gateway_url}/api/v1/rm/me", headers={"Authorization": f"Bearer {full_key}"})
    denied = httpx.post(f"{stack.gateway_url}/api/v1/rm/keys", json={}, headers={"Authorization": f"Bearer {read_key}"})

    assert me.json()["user_name"] == "alice"
    assert denied.status_code == 403
    assert httpx.get(f"{stack.gateway_url}/api/v1/rm/me").status_code == 401
