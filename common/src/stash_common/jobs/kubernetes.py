"""KubernetesLauncher: each worker as a batch/v1 Job on the GPU node pool (`STASH_LAUNCHER=kubernetes`).

A launch creates one Job named after the launch (`JobLaunch.name`), so a duplicate delivery finds
the existing Job: a 409 from the API adopts it. The Job runs the worker image's
`python -m stash_common.jobs.worker <kind> --job <key>` with `backoffLimit: 0`, an `activeDeadlineSeconds`, a
`ttlSecondsAfterFinished`, the GPU pool's node selector and tolerations, requests and limits
(`nvidia.com/gpu` for training and scoring), labels carrying the run and job ids, an optional Kueue
queue label, the service account, and credentials only through `envFrom` and `secretKeyRef`.

One watcher thread per launcher follows its Jobs (a label selector): it resumes each watch from
the last resourceVersion it saw, re-lists every `relist_interval_s` (and after a 410 Gone), and a
client-side timeout ends a watch the server keeps open. A Job ends as `JobEnd`: Complete succeeded
(the worker has reported its result over gRPC by then); Failed names its reason (DeadlineExceeded,
BackoffLimitExceeded, an OOMKilled container) and the last line of the pod's log; a pod that cannot
pull its image fails the launch at once (its Job is deleted) instead of waiting for the deadline; a
Job that vanished fails too. `kill` deletes the Job with propagation Background. Jobs outlive the
service (`detached`), so a sweep on any replica `recover`s them by name.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from time import monotonic
from typing import Any

import structlog
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.watch.watch import iter_resp_lines
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict
from urllib3.exceptions import HTTPError, ProtocolError, ReadTimeoutError

from stash_common.errors import StashError, Unavailable
from stash_common.jobs.kinds import worker_kind
from stash_common.jobs.launch import JobEnd, JobLaunch, last_log_line, worker_command

log = structlog.get_logger()
# The API server out of reach: a socket error, or urllib3 giving up on its retries (MaxRetryError is no OSError).
UNREACHABLE = (OSError, HTTPError)
NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
KIND_LABEL, RUN_LABEL, JOB_LABEL = "stash.rm/kind", "stash.rm/run-id", "stash.rm/job-id"
PART_OF = {"app.kubernetes.io/part-of": "stash-rm"}
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
IMAGE_PULL_ERRORS = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"})
PODS_CHECK_S = 10.0  # how often a running Job's pods are checked for an image that cannot be pulled
A10G_NODES = {"nvidia.com/gpu.product": "NVIDIA-A10G"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
WORKER_UID = 10001  # the worker image's user (docker/worker/Dockerfile)
NON_ROOT = {"runAsNonRoot": True, "runAsUser": WORKER_UID, "runAsGroup": WORKER_UID}


class KubernetesJobSettings(BaseSettings):
    """How this service's Jobs look (`STASH_JOB_*`); unset sizes take the kind's (`stash_common.jobs.kinds`)."""

    model_config = SettingsConfigDict(env_prefix="STASH_JOB_", extra="ignore")

    namespace: str | None = Field(None, description="namespace of the Jobs; unset: this pod's own namespace")
    image: str = Field("stash-rm-worker:latest", description="the worker image (torch with CUDA)")
    image_pull_policy: str = Field("IfNotPresent", description="imagePullPolicy of the worker container")
    service_account: str | None = Field(None, description="service account the Jobs' pods run as")
    node_selector: dict[str, str] = Field(
        default_factory=lambda: dict(A10G_NODES), description="node labels of the GPU pool (JSON)"
    )
    tolerations: list[dict[str, Any]] = Field(
        default_factory=lambda: [dict(GPU_TOLERATION)], description="tolerations for the GPU nodes' taints (JSON)"
    )
    resources: dict[str, dict[str, str | int]] | None = Field(
        None, description="requests and limits of the worker (JSON); unset: the kind's (stash_common.jobs.kinds)"
    )
    active_deadline_s: int | None = Field(None, ge=1, description="activeDeadlineSeconds (training: 40 min)")
    pod_labels: dict[str, str] = Field(default_factory=dict, description="more labels of the Jobs' pods (JSON)")
    ttl_after_finished_s: int = Field(3600, ge=0, description="ttlSecondsAfterFinished of a finished Job")
    queue_name: str | None = Field(None, description="Kueue LocalQueue (kueue.x-k8s.io/queue-name); unset: none")
    env_from_config_maps: list[str] = Field(default_factory=list, description="ConfigMaps for envFrom (JSON)")
    env_from_secrets: list[str] = Field(default_factory=list, description="Secrets for envFrom (JSON)")
    secret_env: dict[str, str] = Field(
        default_factory=dict, description='variables from secretKeyRef, {"VAR": "secret/key"} (JSON)'
    )
    relist_interval_s: float = Field(300.0, gt=0, description="seconds between full re-lists of the Jobs")
    watch_timeout_s: float = Field(60.0, gt=0, description="seconds one watch request stays open")


def job_manifest(job: JobLaunch, settings: KubernetesJobSettings, namespace: str) -> dict[str, Any]:
    """The batch/v1 Job that runs `python -m stash_common.jobs.worker <kind> --job <key>` for `job`."""
    labels = {**PART_OF, KIND_LABEL: job.kind, RUN_LABEL: job.run_id, JOB_LABEL: job.job_id}
    metadata_labels = {**labels, **({QUEUE_LABEL: settings.queue_name} if settings.queue_name else {})}
    pod_labels = {**settings.pod_labels, **labels}
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,  # the worker talks to its service over gRPC, not to the API
        "securityContext": {**NON_ROOT, "fsGroup": WORKER_UID, "seccompProfile": {"type": "RuntimeDefault"}},
        "nodeSelector": dict(settings.node_selector),
        "tolerations": list(settings.tolerations),
        "containers": [_container(job, settings)],
        "volumes": [{"name": "scratch", "emptyDir": {}}],
    }
    if settings.service_account:
        pod["serviceAccountName"] = settings.service_account
    spec: dict[str, Any] = {
        "backoffLimit": 0,
        "activeDeadlineSeconds": settings.active_deadline_s or worker_kind(job.kind).deadline_s,
        "ttlSecondsAfterFinished": settings.ttl_after_finished_s,
        "template": {"metadata": {"labels": pod_labels}, "spec": pod},
    }
    if settings.queue_name:
        spec["suspend"] = True  # Kueue admits the Job by quota and unsuspends it
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": job.name, "namespace": namespace, "labels": metadata_labels},
        "spec": spec,
    }


def _container(job: JobLaunch, settings: KubernetesJobSettings) -> dict[str, Any]:
    resources = settings.resources or worker_kind(job.kind).resources
    # Quantities as strings, the way the API returns them (the chart's values may hold plain numbers).
    resources = {part: {name: str(value) for name, value in amounts.items()} for part, amounts in resources.items()}
    env_from = [{"configMapRef": {"name": name}} for name in settings.env_from_config_maps]
    env_from += [{"secretRef": {"name": name}} for name in settings.env_from_secrets]
    env: list[dict[str, Any]] = [{"name": "TMPDIR", "value": "/scratch"}]
    for variable, reference in settings.secret_env.items():
        secret, _, key = reference.partition("/")
        env.append({"name": variable, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}})
    return {
        "name": "worker",
        "image": settings.image,
        "imagePullPolicy": settings.image_pull_policy,
        "command": worker_command(job, "python"),
        "env": env,
        "envFrom": env_from,
        "resources": resources,
        "securityContext": {
            **NON_ROOT,
            "allowPrivilegeEscalation": False,
            "privileged": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
    }


def job_end(name: str, job: Mapping[str, Any] | None, pods: list[Mapping[str, Any]]) -> JobEnd | None:
    """How the Job `name` ended, from it and its pods; None while it runs. A vanished Job (None) failed."""
    if job is None:
        return JobEnd(False, f"the Kubernetes Job {name} no longer exists (deleted, or removed after it finished)")
    conditions = {item.get("type"): item for item in (job.get("status") or {}).get("conditions") or []}
    if _true(conditions.get("Complete")):
        return JobEnd(True, exit_code=0)
    failed = conditions.get("Failed")
    pod_problem = _pod_problem(pods)
    if _true(failed):
        assert failed is not None  # for type-checkers: _true checked it
        reason = pod_problem or f"{failed.get('reason') or 'Failed'}: {failed.get('message') or 'no message'}"
        return JobEnd(False, f"the Kubernetes Job {name} failed: {reason}", _exit_code(pods))
    if pod_problem and pod_problem.startswith("image pull error"):
        return JobEnd(False, f"the Kubernetes Job {name} cannot start: {pod_problem}")
    return None


def _true(condition: Mapping[str, Any] | None) -> bool:
    return condition is not None and condition.get("status") == "True"


def _container_states(pods: list[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    for pod in pods:
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            yield status.get("state") or {}


def _pod_problem(pods: list[Mapping[str, Any]]) -> str | None:
    """An OOMKilled container or an image the node cannot pull, named; None when the pods show neither."""
    for state in _container_states(pods):
        terminated, waiting = state.get("terminated") or {}, state.get("waiting") or {}
        if terminated.get("reason") == "OOMKilled":
            return "OOMKilled: the worker ran out of memory (raise its limit: STASH_JOB_RESOURCES)"
        if waiting.get("reason") in IMAGE_PULL_ERRORS:
            return f"image pull error: {waiting['reason']}: {waiting.get('message') or 'no message'}"
    return None


def _exit_code(pods: list[Mapping[str, Any]]) -> int | None:
    for state in _container_states(pods):
        code = (state.get("terminated") or {}).get("exitCode")
        if isinstance(code, int):
            return code
    return None


class KubernetesJob:
    """A launched Job, as the launcher's watcher sees it."""

    def __init__(self, launcher: KubernetesLauncher, name: str) -> None:
        self.name = name
        self._launcher = launcher
        self._pods_checked = -PODS_CHECK_S

    def wait(self, timeout_s: float) -> JobEnd | None:
        """Wait up to `timeout_s` for the Job to finish; how it ended, or None while it runs (or the API is away)."""
        try:
            job = self._launcher.wait_for_change(self.name, timeout_s)
        except StashError as error:
            log.warning("the Job's state is unknown for now", job_name=self.name, error=error.message)
            return None
        finished = job is None or _finished(job)
        if not finished and monotonic() - self._pods_checked < PODS_CHECK_S:
            return None
        self._pods_checked = monotonic()
        pods = self._launcher.pods(self.name)
        end = job_end(self.name, job, pods)
        if end is None or end.succeeded:
            return end
        if job is not None and not finished:
            self._launcher.delete(self.name)  # an image that cannot be pulled would otherwise wait for the deadline
        return JobEnd(end.succeeded, self._with_log(end.detail, pods), end.exit_code)

    def kill(self) -> None:
        """Delete the Job (propagation Background: its pods go too)."""
        self._launcher.delete(self.name)

    def _with_log(self, detail: str, pods: list[Mapping[str, Any]]) -> str:
        line = self._launcher.last_log_line(pods)
        return f"{detail}; pod log: {line}" if line else detail


class KubernetesLauncher:
    """Launches workers as Jobs in one namespace and watches them."""

    detached = True

    def __init__(self, settings: KubernetesJobSettings, api: k8s.ApiClient) -> None:
        self.settings = settings
        self.namespace = settings.namespace or _own_namespace()
        self._batch = k8s.BatchV1Api(api)
        self._core = k8s.CoreV1Api(api)
        self._jobs: dict[str, dict[str, Any]] = {}  # name → the Job as last seen
        self._listed = False
        self._changed = threading.Condition()
        self._stopping = threading.Event()
        self._watcher = threading.Thread(target=self._watch_jobs, name="kubernetes-jobs", daemon=True)

    @classmethod
    def from_environment(cls) -> KubernetesLauncher:
        """A launcher with the pod's in-cluster credentials (or the local kubeconfig) and STASH_JOB_* settings."""
        try:
            k8s_config.load_incluster_config()
        except k8s_config.ConfigException:
            k8s_config.load_kube_config()
        return cls(KubernetesJobSettings(), k8s.ApiClient())

    def launch(self, job: JobLaunch) -> KubernetesJob:
        """Create the Job of `job`; an existing one of the same name (a duplicate delivery) is adopted."""
        manifest = job_manifest(job, self.settings, self.namespace)
        try:
            self._batch.create_namespaced_job(self.namespace, manifest)
        except k8s.ApiException as error:
            if error.status != 409:
                raise _api_error(f"creating Job {job.name}", error) from None
            log.info("adopting an existing Job", job_name=job.name)
        except UNREACHABLE as error:
            raise Unavailable(f"the Kubernetes API is unreachable creating Job {job.name}: {error}") from None
        self._start_watching()
        return KubernetesJob(self, job.name)

    def recover(self, name: str) -> KubernetesJob | None:
        """The Job `name` launched by another process (its state, even its absence, tells how it ended)."""
        self._start_watching()
        return KubernetesJob(self, name)

    def stop(self) -> None:
        """Stop watching (the Jobs run on)."""
        self._stopping.set()
        with self._changed:
            self._changed.notify_all()

    def wait_for_change(self, name: str, timeout_s: float) -> dict[str, Any] | None:
        """The Job `name` after waiting up to `timeout_s` for it to finish; None once it is gone.

        A Job the watcher has not seen (not yet, or not any more) is read from the API.
        """
        deadline = monotonic() + timeout_s
        with self._changed:
            while name in self._jobs and not _finished(self._jobs[name]) and not self._stopping.is_set():
                remaining = deadline - monotonic()
                if remaining <= 0:
                    break
                self._changed.wait(remaining)
            seen = self._jobs.get(name)
        if seen is None and (seen := self._read(name)) is not None:
            with self._changed:
                self._jobs.setdefault(name, seen)
        return seen

    def pods(self, name: str) -> list[Mapping[str, Any]]:
        """The Job's pods (by the job-name label Kubernetes sets); none when the API does not answer."""
        try:
            listed = self._raw(self._core.list_namespaced_pod, self.namespace, label_selector=f"job-name={name}")
        except (k8s.ApiException, *UNREACHABLE):
            log.warning("could not list a Job's pods", job_name=name, exc_info=True)
            return []
        # Filtered here too: the labels are the contract, whatever the server did with the selector.
        return [pod for pod in listed.get("items") or [] if _labels(pod).get("job-name") == name]

    def last_log_line(self, pods: list[Mapping[str, Any]]) -> str | None:
        """The last line of the first pod's log; None when it cannot be read."""
        for pod in pods:
            try:
                response = self._core.read_namespaced_pod_log(
                    pod["metadata"]["name"], self.namespace, tail_lines=20, _preload_content=False
                )
            except (k8s.ApiException, *UNREACHABLE, KeyError):
                continue
            return last_log_line(response.data.decode("utf-8", errors="replace"))
        return None

    def delete(self, name: str) -> None:
        """Delete the Job and, in the background, its pods; an absent Job is fine."""
        try:
            self._batch.delete_namespaced_job(name, self.namespace, propagation_policy="Background")
        except k8s.ApiException as error:
            if error.status != 404:
                log.warning("could not delete a Job", job_name=name, status=error.status)
        except UNREACHABLE:
            log.warning("could not delete a Job", job_name=name, exc_info=True)

    def _read(self, name: str) -> dict[str, Any] | None:
        try:
            return self._raw(self._batch.read_namespaced_job, name, self.namespace)
        except k8s.ApiException as error:
            if error.status == 404:
                return None
            raise _api_error(f"reading Job {name}", error) from None
        except UNREACHABLE as error:
            raise Unavailable(f"the Kubernetes API is unreachable reading Job {name}: {error}") from None

    def _start_watching(self) -> None:
        with self._changed:
            if not self._watcher.is_alive() and not self._stopping.is_set():
                self._watcher.start()

    def _watch_jobs(self) -> None:
        resource_version: str | None = None
        next_list = 0.0
        while not self._stopping.is_set():
            try:
                if resource_version is None or monotonic() >= next_list:
                    resource_version = self._relist()
                    next_list = monotonic() + self.settings.relist_interval_s
                resource_version = self._follow(resource_version, next_list)
            except k8s.ApiException as error:
                if error.status == 410:  # the resourceVersion is too old: list again
                    resource_version = None
                    continue
                log.warning("watching Jobs failed; retrying", status=error.status)
                self._stopping.wait(5.0)
            except (ReadTimeoutError, ProtocolError):
                continue  # the client-side timeout ended a watch the server kept open: resume from the last version
            except Exception as error:  # an unreachable server, a malformed event: retry from the last version
                log.warning("watching Jobs failed; retrying", error=f"{type(error).__name__}: {error}")
                self._stopping.wait(1.0)

    def _relist(self) -> str | None:
        listed = self._raw(self._batch.list_namespaced_job, self.namespace, label_selector=self._selector())
        jobs = {job["metadata"]["name"]: job for job in listed.get("items") or [] if self._ours(job)}
        with self._changed:
            self._jobs, self._listed = jobs, True
            self._changed.notify_all()
        return (listed.get("metadata") or {}).get("resourceVersion")

    def _follow(self, resource_version: str | None, until: float) -> str | None:
        """Apply watch events until the re-list is due; the last resourceVersion seen."""
        timeout = self.settings.watch_timeout_s
        # watch="true", not True: the client would send "True", which an API server parses but not every emulator.
        response = self._batch.list_namespaced_job(
            self.namespace,
            label_selector=self._selector(),
            watch="true",
            resource_version=resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=int(timeout),
            _preload_content=False,
            _request_timeout=timeout + 5,  # the server may ignore timeout_seconds: the client ends the watch
        )
        try:
            for line in iter_resp_lines(response):
                if line.strip():
                    resource_version = self._apply(json.loads(line)) or resource_version
                if self._stopping.is_set() or monotonic() >= until:
                    break
        finally:
            response.release_conn()
        return resource_version

    def _apply(self, event: Mapping[str, Any]) -> str | None:
        kind, job = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            raise k8s.ApiException(status=job.get("code"), reason=job.get("reason"))
        version = (job.get("metadata") or {}).get("resourceVersion")
        if kind == "BOOKMARK" or not self._ours(job):
            return version
        with self._changed:
            if kind == "DELETED":
                self._jobs.pop(job["metadata"]["name"], None)
            else:
                self._jobs[job["metadata"]["name"]] = dict(job)
            self._changed.notify_all()
        return version

    def _selector(self) -> str:
        return ",".join(f"{key}={value}" for key, value in PART_OF.items())

    def _ours(self, job: Mapping[str, Any]) -> bool:
        labels = _labels(job)
        return all(labels.get(key) == value for key, value in PART_OF.items()) and KIND_LABEL in labels

    def _raw(self, call: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        response = call(*args, _preload_content=False, **kwargs)
        return dict(json.loads(response.data))


def _finished(job: Mapping[str, Any] | None) -> bool:
    conditions = (job or {}).get("status", {}) or {}
    return any(
        _true(item) and item.get("type") in ("Complete", "Failed") for item in conditions.get("conditions") or []
    )


def _labels(resource: Mapping[str, Any]) -> Mapping[str, str]:
    return (resource.get("metadata") or {}).get("labels") or {}


def _own_namespace() -> str:
    return NAMESPACE_FILE.read_text().strip() if NAMESPACE_FILE.is_file() else "default"


def _api_error(doing: str, error: k8s.ApiException) -> StashError:
    """The platform error for a refused API call: an unreachable or overloaded server is retryable."""
    message = f"the Kubernetes API refused {doing}: {error.status} {error.reason}"
    if error.status in (None, 429, 500, 502, 503, 504):
        return Unavailable(message)
    return StashError(message)
