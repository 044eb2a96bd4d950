"""A Kubernetes API server emulator (kmock's KubernetesEmulator) on a real HTTP port, for the synchronous client.

No real API server can run on this machine; the emulator serves the kubernetes client's create, read,
list, patch-status, delete and watch over HTTP from an asyncio loop in a background thread. It
assigns no uid or resourceVersion, its watch ignores timeouts, and it ignores label selectors (the
launcher filters by label itself). A test drives a Job's status through the API as the Job
controller would (`patch_namespaced_job_status`), and creates its pods as the kubelet would report them.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import kmock
from kubernetes import client

POD_LOG = "Traceback (most recent call last):\ntorch.OutOfMemoryError: CUDA out of memory\n"


@dataclass
class KubernetesApi:
    """The emulator's client, and its APIs."""

    api_client: client.ApiClient
    batch: client.BatchV1Api
    core: client.CoreV1Api

    def set_job_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        """Patch a Job's status, as the Job controller does."""
        self.batch.patch_namespaced_job_status(name, namespace, {"status": status})

    def add_pod(self, namespace: str, job_name: str, state: dict[str, Any]) -> None:
        """A pod of the Job whose worker container is in `state` (`terminated`, `waiting`, ...)."""
        self.core.create_namespaced_pod(
            namespace,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"{job_name}-pod", "namespace": namespace, "labels": {"job-name": job_name}},
                "spec": {"containers": [{"name": "worker", "image": "worker"}]},
                "status": {
                    "containerStatuses": [
                        {
                            "name": "worker",
                            "image": "worker",
                            "imageID": "",
                            "ready": False,
                            "restartCount": 0,
                            "state": state,
                        }
                    ]
                },
            },
        )


@contextmanager
def emulated_kubernetes() -> Iterator[KubernetesApi]:
    """A running emulator that knows Jobs and Pods (whose logs read as POD_LOG); its client."""
    ready = threading.Event()
    served: dict[str, Any] = {}

    async def serve() -> None:
        stop = asyncio.Event()
        async with kmock.KubernetesEmulator() as emulator, kmock.Server(emulator) as server:
            emulator.resources["batch/v1/jobs"] = kmock.ResourceInfo(namespaced=True, kind="Job")
            emulator.resources["v1/pods"] = kmock.ResourceInfo(namespaced=True, kind="Pod")
            emulator["get", re.compile(r"/api/v1/namespaces/[^/]+/pods/[^/]+/log")] << POD_LOG.encode()
            served.update(url=str(server.url).rstrip("/"), loop=asyncio.get_running_loop(), stop=stop)
            ready.set()
            await stop.wait()
            # Like a real API server ending its watches at shutdown, close the connections: a watch the emulator
            # holds open (it ignores timeoutSeconds) would otherwise delay the shutdown until the client gives up.
            for connection in server.server.runner.server.connections:
                connection.force_close()

    thread = threading.Thread(target=asyncio.run, args=(serve(),), name="kubernetes-emulator", daemon=True)
    thread.start()
    assert ready.wait(30), "the Kubernetes emulator did not start"
    configuration = client.Configuration()
    configuration.host = served["url"]
    api_client = client.ApiClient(configuration)
    try:
        yield KubernetesApi(api_client, client.BatchV1Api(api_client), client.CoreV1Api(api_client))
    finally:
        api_client.close()
        served["loop"].call_soon_threadsafe(served["stop"].set)
        thread.join(30)
