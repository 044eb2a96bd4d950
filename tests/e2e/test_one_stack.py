"""One stack per data directory and per port, and services that know which stack they belong to.

A second `stash-rm up` used to report "all SERVING" within two seconds, answered by the first stack, while
its own servers shared the first one's ports (gRPC's SO_REUSEPORT) and took some of its connections. Now it
is refused before it starts anything, naming what holds the directory or the port; a service started alone
on a served directory is refused the same way; and a peer of another stack is told apart from one's own.
"""

import time
from pathlib import Path

import httpx
import pytest

from support.processes import free_port, stack_env, start_service, stash_rm, wait_for_http
from support.stack import RunningStack


@pytest.fixture(scope="module")
def stack(embedded_stack: RunningStack) -> RunningStack:
    return embedded_stack.for_module("first")


def test_a_second_up_on_the_same_data_dir_is_refused_naming_the_first(stack: RunningStack) -> None:
    second = stash_rm("up", env=stack.env)

    assert second.returncode == 1
    assert (
        f"error: the data directory {stack.data_dir} is already served by a running stack (stash-rm up), "
        f"pid {stack.process.pid}; stop it, or choose another directory with --data-dir or STASH_DATA_DIR"
    ) in " ".join(second.stderr.split())


def test_a_second_up_on_the_same_ports_is_refused_naming_the_port_and_what_holds_it(
    stack: RunningStack, tmp_path: Path
) -> None:
    second = stash_rm("up", env={**stack.env, "STASH_DATA_DIR": str(tmp_path)})

    message = " ".join(second.stderr.split())
    port = stack.env["STASH_INGEST_PORT"]
    assert second.returncode == 1
    assert f"error: port {port} on 127.0.0.1 is already in use by pid {stack.pid('ingest')} (" in message
    assert "-m stash_ingest); stop it, or set STASH_INGEST_PORT to a free port" in message
    assert not (tmp_path / "logs").exists()  # nothing was started
    assert httpx.get(f"{stack.gateway_url}/readyz").json()["stack_id"]  # the first stack serves on


def test_a_service_started_alone_on_a_served_data_dir_is_refused(stack: RunningStack) -> None:
    env = {**stack.env, "STASH_LABELER_PORT": str(free_port())}
    alone = start_service("labeler", env)
    output, _ = alone.communicate(timeout=120)

    assert alone.returncode == 1
    assert f"is already served by a running labeler service, pid {stack.pid('labeler')}" in output


def test_a_service_of_another_stack_is_not_counted_as_ours(stack: RunningStack, tmp_path: Path) -> None:
    own_id = httpx.get(f"{stack.gateway_url}/readyz").json()["stack_id"]
    stranger_port = free_port()
    stranger = start_service(
        "ingest",
        {"STASH_DATA_DIR": str(tmp_path / "stranger"), "STASH_INGEST_PORT": str(stranger_port), "STASH_STACK_ID": "x"},
    )
    # A gateway of the first stack's id whose ingest address points at the stranger; the others are the stack's.
    gateway_env = {
        **stack_env(tmp_path / "gateway"),
        **{name: value for name, value in stack.env.items() if name.endswith("_ADDRESS")},
        "STASH_INGEST_ADDRESS": f"127.0.0.1:{stranger_port}",
        "STASH_STACK_ID": own_id,
    }
    gateway = start_service("gateway", gateway_env)
    try:
        wait_for_http(f"http://127.0.0.1:{gateway_env['STASH_GATEWAY_PORT']}/livez", timeout_s=120)
        ready = _until_ingest_answers(f"http://127.0.0.1:{gateway_env['STASH_GATEWAY_PORT']}/readyz")
        status = stash_rm("status", env={**stack.env, "STASH_INGEST_PORT": str(stranger_port)})
    finally:
        for process in (gateway, stranger):
            process.terminate()
            process.wait(timeout=30)

    assert ready.status_code == 503 and ready.json()["services"]["ingest"] == "ANOTHER_STACK", ready.text
    assert ready.json()["services"]["labeler"] == "SERVING"
    assert status.returncode == 1 and "ANOTHER_STACK" in status.stdout


def _until_ingest_answers(url: str) -> httpx.Response:
    """/readyz once the stranger ingest answers at all (it starts alongside the gateway)."""
    deadline = time.monotonic() + 120
    while (ready := httpx.get(url, timeout=10)).json()["services"]["ingest"] == "UNREACHABLE":
        if time.monotonic() > deadline:
            break
        time.sleep(0.2)
    return ready
