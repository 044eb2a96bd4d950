"""The launcher STASH_LAUNCHER names: `local` (a subprocess per job) or `kubernetes` (a Job per job)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from stash_common.jobs.launch import Launcher
from stash_common.jobs.local import LocalSubprocessLauncher


def make_launcher(
    kind: Literal["local", "kubernetes"], log_dir: Path, local_env: Mapping[str, str] | None = None
) -> Launcher:
    """Local subprocesses logging under `log_dir` with `local_env` added to their environment, or Kubernetes
    Jobs configured by STASH_JOB_*."""
    if kind == "kubernetes":
        from stash_common.jobs.kubernetes import KubernetesLauncher  # the kubernetes client loads only here

        return KubernetesLauncher.from_environment()
    return LocalSubprocessLauncher(log_dir, local_env)
