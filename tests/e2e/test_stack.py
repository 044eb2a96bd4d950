"""`stash-rm up` end to end: six processes, all SERVING, /healthz, a crashed service restarted, signals."""

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from stash_common.storage import LocalObjectStore, load_signing_key
from support.ingest import stash_line
from support.processes import stack_env, stash_rm, wait_for_health
from support.stack import RunningStack, launch_up, read_until, running_stack

SERVICES = ("ingest", "labeler", "trainer", "scorer", "gepa", "gateway")


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[RunningStack]:
    """A stack of the test's own, for the tests that stop, kill or restart its services or need a cold one."""
    with running_stack(tmp_path) as running:
        yield running


@pytest.fixture(scope="module")
def shared(embedded_stack: RunningStack) -> RunningStack:
    """The session's embedded stack, for the tests that only read it or add their own users and files."""
    return embedded_stack.for_module("stack")


def test_up_brings_every_service_to_serving_and_healthz_200(shared: RunningStack) -> None:
    response = httpx.get(f"{shared.gateway_url}/healthz")

    assert response.status_code == 200
    assert set(response.json()["services"].values()) == {"SERVING"}
    status = stash_rm("status", env=shared.env)
    assert status.returncode == 0, status.stdout + status.stderr
    assert status.stdout.count("SERVING") == 6


def test_a_killed_service_is_named_by_healthz_then_restarted_and_counted(stack: RunningStack) -> None:
    os.kill(stack.pid("labeler"), signal.SIGKILL)

    deadline = time.monotonic() + 20
    while (response := httpx.get(f"{stack.gateway_url}/healthz")).status_code == 200 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert response.status_code == 503
    assert "labeler" in response.json()["detail"]
    assert response.json()["services"]["ingest"] == "SERVING"
    logged = read_until(stack.process, "labeler restarted")
    _wait_until_healthy(stack)

    assert "labeler exited with code -9; restarting in 0.5s" in logged
    status = stash_rm("status", env=stack.env)
    assert status.returncode == 0, status.stdout
    assert "1 (last exit -9)" in _row(status.stdout, "labeler")
    assert _row(status.stdout, "ingest").split()[-1] == "0"


def test_status_exits_1_and_says_unreachable_without_a_stack(tmp_path: Path) -> None:
    status = stash_rm("status", env=stack_env(tmp_path))

    assert status.returncode == 1
    assert status.stdout.count("UNREACHABLE") == 6
    assert _row(status.stdout, "ingest").split()[-1] == "-"


def test_the_gateway_serves_ingest_reads_within_two_seconds_of_its_restart(stack: RunningStack) -> None:
    with stack.client(stack.create_user("alice")) as alice:
        assert alice.get("/traces").status_code == 200
        os.kill(stack.pid("ingest"), signal.SIGKILL)
        read_until(stack.process, "ingest restarted")
        _wait_for_grpc(stack, "ingest")
        back = time.monotonic()
        while (listed := alice.get("/traces")).status_code == 503 and time.monotonic() - back < 10:
            time.sleep(0.05)

        assert listed.status_code == 200, listed.text
        assert time.monotonic() - back < 2.0


def test_the_first_trace_after_a_cold_start_is_labeled_within_two_seconds(stack: RunningStack) -> None:
    with stack.client(stack.create_user("alice")) as alice:
        imported = time.monotonic()
        trace_id = alice.post("/traces/import", json={"format": "auto", "data": stash_line("cold")}).json()
        while _evaluation_status(alice, trace_id["trace_ids"][0]) != "succeeded" and time.monotonic() - imported < 10:
            time.sleep(0.05)

        assert time.monotonic() - imported < 2.0


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_up_stops_on_a_signal_it_inherited_ignored(tmp_path: Path, signum: signal.Signals) -> None:
    process = launch_up(stack_env(tmp_path, COLUMNS="200"), ignoring=(signal.SIGINT, signal.SIGTERM))
    read_until(process, "Gateway:")
    pids = [int((tmp_path / "run" / f"{name}.pid").read_text()) for name in SERVICES]

    process.send_signal(signum)
    output, _ = process.communicate(timeout=60)

    assert process.returncode == 0, output
    assert "Stopped." in output
    assert not [pid for pid in pids if _alive(pid)]


def test_a_killed_up_leaves_no_service_behind(tmp_path: Path) -> None:
    process = launch_up(stack_env(tmp_path, COLUMNS="200"))
    read_until(process, "Gateway:")
    pids = [int((tmp_path / "run" / f"{name}.pid").read_text()) for name in SERVICES]

    process.kill()
    process.communicate(timeout=10)
    deadline = time.monotonic() + 30  # each service drains gracefully on the SIGTERM the kernel sends it
    while (alive := [pid for pid in pids if _alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.1)

    assert alive == []


def _row(table: str, service: str) -> str:
    return next(line for line in table.splitlines() if f" {service} " in line).replace("│", " ")


def _alive(pid: int) -> bool:
    """Whether a process with this id still runs (a zombie counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def _wait_for_grpc(stack: RunningStack, service: str) -> None:
    wait_for_health(stack.env[f"STASH_{service.upper()}_ADDRESS"])


def _wait_until_healthy(stack: RunningStack) -> None:
    deadline = time.monotonic() + 30
    while httpx.get(f"{stack.gateway_url}/healthz").status_code != 200 and time.monotonic() < deadline:
        time.sleep(0.1)


def _evaluation_status(client: httpx.Client, trace_id: str) -> str | None:
    return (client.get(f"/traces/{trace_id}").json()["evaluation"] or {}).get("status")


def test_ctrl_c_stops_every_service(stack: RunningStack) -> None:
    pids = [stack.pid(name) for name in SERVICES]

    stack.process.send_signal(signal.SIGINT)
    output, _ = stack.process.communicate(timeout=60)

    assert stack.process.returncode == 0, output
    assert "Stopped." in output
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_local_artifact_presigned_url_downloads_over_http(shared: RunningStack) -> None:
    store = LocalObjectStore(
        shared.data_dir / "artifacts", shared.gateway_url, load_signing_key(shared.data_dir, configured=None)
    )
    store.put("models/test-stack/model.tar.gz", b"checkpoint bytes")

    url = store.presign("models/test-stack/model.tar.gz", expires_s=300)

    assert httpx.get(url).content == b"checkpoint bytes"
    assert httpx.get(url.replace("signature=", "signature=0")).status_code == 403


def test_users_and_keys_created_by_cli_authenticate(shared: RunningStack) -> None:
    name = f"alice{shared.user_suffix}"
    created = stash_rm("users", "create", name, env=shared.env)
    assert created.returncode == 0, created.stderr
    full_key = created.stdout.split("shown once): ")[1].split()[0]
    read_only = stash_rm("keys", "create", name, "--read-only", env=shared.env)
    read_key = read_only.stdout.split("shown once): ")[1].split()[0]

    me = httpx.get(f"{shared.gateway_url}/api/v1/rm/me", headers={"Authorization": f"Bearer {full_key}"})
    denied = httpx.post(
        f"{shared.gateway_url}/api/v1/rm/keys", json={}, headers={"Authorization": f"Bearer {read_key}"}
    )

    assert me.json()["user_name"] == name
    assert denied.status_code == 403
    assert httpx.get(f"{shared.gateway_url}/api/v1/rm/me").status_code == 401
