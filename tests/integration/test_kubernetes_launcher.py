"""KubernetesLauncher against an API server emulator over HTTP: the Jobs it creates (strictly valid manifests),
adoption of a duplicate, the outcomes a test drives through the Job's status and pods, deletion, and recovery by
another replica. No real API server can run here (tests/support/kubernetes_api.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from stash_common.errors import Unavailable
from stash_common.jobs.kubernetes import KubernetesJob, KubernetesJobSettings, KubernetesLauncher, job_manifest
from stash_common.jobs.launch import JobEnd, JobLaunch
from support.kubernetes_api import KubernetesApi, emulated_kubernetes
from support.manifests import strict_validation_errors
from support.processes import refused_addresses

NAMESPACE = "stash"
TRAIN = JobLaunch("train", "model-1", "0b7c7a4e-5b0b-4b59-9a57-4a3f1b2f9c10", "jobs/trainer/0b7c7a4e")
SETTINGS = KubernetesJobSettings(
    namespace=NAMESPACE,
    image="registry.example.com/stash-rm-worker:1.0",
    service_account="rm-stash-rm-trainer",
    queue_name="gpu-queue",
    env_from_config_maps=["rm-stash-rm"],
    env_from_secrets=["stash-s3"],
    secret_env={"STASH_SIGNING_KEY": "stash-signing/key"},
    relist_interval_s=2,
    watch_timeout_s=1,
)


@pytest.fixture
def kube() -> Iterator[KubernetesApi]:
    with emulated_kubernetes() as api:
        yield api


@pytest.fixture
def launcher(kube: KubernetesApi) -> Iterator[KubernetesLauncher]:
    running = KubernetesLauncher(SETTINGS, kube.api_client)
    yield running
    running.stop()


def _ended(job: KubernetesJob, timeout_s: float = 20.0) -> JobEnd | None:
    """Poll the Job the way a dispatcher's watcher does, until it ends or `timeout_s` passes."""
    deadline = time.monotonic() + timeout_s
    while (end := job.wait(0.5)) is None and time.monotonic() < deadline:
        pass
    return end


def _stored(kube: KubernetesApi, name: str) -> dict[str, Any]:
    return kube.api_client.sanitize_for_serialization(kube.batch.read_namespaced_job(name, NAMESPACE))


def test_a_training_job_is_one_strictly_valid_gpu_job_named_after_its_launch(
    kube: KubernetesApi, launcher: KubernetesLauncher
) -> None:
    job = launcher.launch(TRAIN)

    stored = _stored(kube, job.name)
    assert job.name == f"stash-train-{TRAIN.job_id}"
    assert strict_validation_errors([stored]) == []
    labels = stored["metadata"]["labels"]
    assert (labels["stash.rm/run-id"], labels["stash.rm/job-id"], labels["kueue.x-k8s.io/queue-name"]) == (
        "model-1",
        TRAIN.job_id,
        "gpu-queue",
    )
    spec = stored["spec"]
    assert (spec["backoffLimit"], spec["activeDeadlineSeconds"], spec["ttlSecondsAfterFinished"]) == (0, 2400, 3600)
    assert spec["suspend"] is True  # Kueue admits it
    pod = spec["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"] == ["python", "-m", "stash_common.jobs.worker", "train", "--job", TRAIN.job_key]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert container["resources"]["requests"]["memory"] == "8Gi"
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-A10G"}
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert pod["serviceAccountName"] == "rm-stash-rm-trainer"
    assert container["envFrom"] == [{"configMapRef": {"name": "rm-stash-rm"}}, {"secretRef": {"name": "stash-s3"}}]
    secret_env = [item for item in container["env"] if "valueFrom" in item]
    assert secret_env == [
        {"name": "STASH_SIGNING_KEY", "valueFrom": {"secretKeyRef": {"name": "stash-signing", "key": "key"}}}
    ]
    assert all("value" not in item or item["name"] == "TMPDIR" for item in container["env"])


@pytest.mark.parametrize("kind", ["train", "score", "gepa"])
def test_every_kinds_manifest_is_strictly_valid_and_only_gepa_runs_without_a_gpu(kind: str) -> None:
    launch = JobLaunch(kind, "run", "job-id", f"jobs/{kind}/job-id")

    manifest = job_manifest(launch, KubernetesJobSettings(), NAMESPACE)

    assert strict_validation_errors([manifest]) == []
    limits = manifest["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert ("nvidia.com/gpu" in limits) == (kind != "gepa")
    assert "suspend" not in manifest["spec"] and "kueue.x-k8s.io/queue-name" not in manifest["metadata"]["labels"]


def test_a_duplicate_launch_adopts_the_existing_job(kube: KubernetesApi, launcher: KubernetesLauncher) -> None:
    first = launcher.launch(TRAIN)
    other_replica = KubernetesLauncher(SETTINGS, kube.api_client)

    second = other_replica.launch(TRAIN)
    kube.set_job_status(NAMESPACE, first.name, {"conditions": [{"type": "Complete", "status": "True"}]})

    assert second.name == first.name
    assert len(kube.batch.list_namespaced_job(NAMESPACE).items) == 1
    assert _ended(second) == JobEnd(True, exit_code=0)
    other_replica.stop()


def test_a_running_job_is_still_running(kube: KubernetesApi, launcher: KubernetesLauncher) -> None:
    job = launcher.launch(TRAIN)
    kube.set_job_status(NAMESPACE, job.name, {"active": 1})

    assert job.wait(1.0) is None


def test_a_completed_job_succeeds(kube: KubernetesApi, launcher: KubernetesLauncher) -> None:
    job = launcher.launch(TRAIN)

    kube.set_job_status(NAMESPACE, job.name, {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]})

    assert _ended(job) == JobEnd(True, exit_code=0)


@pytest.mark.parametrize(
    ("reason", "pod_state", "named"),
    [
        ("DeadlineExceeded", None, "DeadlineExceeded: Job was active longer than specified deadline"),
        ("BackoffLimitExceeded", {"terminated": {"exitCode": 1, "reason": "Error"}}, "BackoffLimitExceeded: "),
        ("BackoffLimitExceeded", {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}, "OOMKilled: "),
    ],
)
def test_a_failed_job_fails_naming_why_with_the_pods_last_log_line(
    kube: KubernetesApi,
    launcher: KubernetesLauncher,
    reason: str,
    pod_state: dict[str, Any] | None,
    named: str,
) -> None:
    job = launcher.launch(TRAIN)
    if pod_state is not None:
        kube.add_pod(NAMESPACE, job.name, pod_state)
    message = {"DeadlineExceeded": "Job was active longer than specified deadline"}.get(reason, "Job has reached")
    condition = {"type": "Failed", "status": "True", "reason": reason, "message": message}

    kube.set_job_status(NAMESPACE, job.name, {"failed": 1, "conditions": [condition]})

    end = _ended(job)
    assert end is not None and not end.succeeded
    assert end.detail.startswith(f"the Kubernetes Job {job.name} failed: {named}")
    if pod_state is not None:
        assert end.exit_code == pod_state["terminated"]["exitCode"]
        assert end.detail.endswith("; pod log: torch.OutOfMemoryError: CUDA out of memory")


def test_an_image_that_cannot_be_pulled_fails_at_once_and_deletes_the_job(
    kube: KubernetesApi, launcher: KubernetesLauncher
) -> None:
    job = launcher.launch(TRAIN)
    waiting = {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image registry.example.com"}}
    kube.add_pod(NAMESPACE, job.name, waiting)
    kube.set_job_status(NAMESPACE, job.name, {"active": 1})

    end = _ended(job)

    assert end is not None and not end.succeeded
    assert end.detail.startswith(
        f"the Kubernetes Job {job.name} cannot start: image pull error: ImagePullBackOff: Back-off pulling image"
    )
    with pytest.raises(client.ApiException) as gone:
        kube.batch.read_namespaced_job(job.name, NAMESPACE)
    assert gone.value.status == 404


def test_killing_a_job_deletes_it_and_its_end_says_so(kube: KubernetesApi, launcher: KubernetesLauncher) -> None:
    job = launcher.launch(TRAIN)

    job.kill()

    assert kube.batch.list_namespaced_job(NAMESPACE).items == []
    end = _ended(job)
    assert end is not None and not end.succeeded and "no longer exists" in end.detail


def test_another_replica_recovers_a_job_by_name_and_sees_how_it_ends(
    kube: KubernetesApi, launcher: KubernetesLauncher
) -> None:
    launched = launcher.launch(TRAIN)
    restarted = KubernetesLauncher(SETTINGS, kube.api_client)

    recovered = restarted.recover(launched.name)
    missing = restarted.recover("stash-train-never-launched")

    assert recovered is not None and recovered.wait(0.5) is None
    kube.set_job_status(NAMESPACE, launched.name, {"conditions": [{"type": "Failed", "status": "True"}]})
    end = _ended(recovered)
    assert end is not None and end.detail == f"the Kubernetes Job {launched.name} failed: Failed: no message"
    assert missing is not None and _ended(missing) == JobEnd(
        False, "the Kubernetes Job stash-train-never-launched no longer exists (deleted, or removed after it finished)"
    )
    restarted.stop()


def test_an_unreachable_api_server_refuses_new_jobs_and_leaves_a_jobs_state_unknown() -> None:
    # urllib3 wraps the refused connection in MaxRetryError, which is no OSError: it once killed a watcher thread.
    with refused_addresses(1) as (address,):
        configuration = client.Configuration()
        configuration.host = f"http://{address}"
        launcher = KubernetesLauncher(SETTINGS, client.ApiClient(configuration))
        try:
            with pytest.raises(Unavailable, match="the Kubernetes API is unreachable creating Job"):
                launcher.launch(TRAIN)
            assert launcher.recover(f"stash-train-{TRAIN.job_id}").wait(0.2) is None
        finally:
            launcher.stop()
