"""The kinds of job a worker runs, each named once: where its code is and what its Kubernetes Job needs.

A kind names its worker package, which has two functions: `remote.run_stored_job(key) -> int` runs
a job whose files are stored under `key` in object storage and reports to its service over gRPC (how
every launcher runs it), and `runner.run_job(job_dir) -> int` runs a job directory in place (by hand).
`stash_common.jobs.worker` imports the package only when a job of its kind runs, so this registry
names services' code without importing it. Adding a kind is a job contract, those two functions and
one entry here (docs/architecture.md, "Adding a job kind").
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from stash_common.errors import InvalidArgument

GPU_WORKER = {"nvidia.com/gpu": "1"}


@dataclass(frozen=True)
class WorkerKind:
    """One kind of job: its worker package, the environment its process needs, and its Job's defaults."""

    name: str  # names the launch, its Kubernetes Job and the Job's kind label
    package: str  # the worker package: `<package>.remote.run_stored_job`, `<package>.runner.run_job`
    resources: Mapping[str, Mapping[str, str]]  # a Job's requests and limits unless STASH_JOB_RESOURCES says
    deadline_s: int  # a Job's activeDeadlineSeconds unless STASH_JOB_ACTIVE_DEADLINE_S says
    environment: Mapping[str, str] = field(default_factory=dict)  # defaults read once, before the worker imports
    # What a local fork server imports once for every worker of the kind (`stash_common.jobs.fork_server`): the
    # modules that load torch, transformers and the kind's other heavy libraries, which a worker imports lazily.
    preload: tuple[str, ...] = ()

    def prepare_environment(self) -> None:
        """Set the variables that huggingface_hub, tokenizers, OpenMP and the kind's libraries read once, when
        first loaded (before a worker or fork server imports them); a variable set already is kept."""
        os.environ["HF_HUB_OFFLINE"] = "1"  # a worker never downloads from the hub
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        for name, value in self.environment.items():
            os.environ.setdefault(name, value)


# GEPA scores small batches between task-model calls; OpenMP's default spin-waiting threads, on CPUs shared
# with other work, wait for a descheduled peer at every barrier (on 2 busy cores a minibatch scored 2-5x
# slower than with passive waiting, which matched one thread's speed on idle cores). LiteLLM reads its
# model price map from its package, not the web.
_GEPA_ENVIRONMENT = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "OMP_WAIT_POLICY": "PASSIVE"}

KINDS: dict[str, WorkerKind] = {
    kind.name: kind
    for kind in (
        WorkerKind(
            "train",
            "stash_trainer.worker",
            {"requests": {"cpu": "4", "memory": "8Gi"}, "limits": {"cpu": "8", "memory": "16Gi", **GPU_WORKER}},
            40 * 60,
            preload=(
                "stash_trainer.worker.remote",
                "stash_trainer.worker.training",
                "stash_common.reward_model.inference",
            ),
        ),
        WorkerKind(
            "score",
            "stash_scorer.worker",
            {"requests": {"cpu": "2", "memory": "8Gi"}, "limits": {"cpu": "4", "memory": "16Gi", **GPU_WORKER}},
            30 * 60,
            preload=("stash_scorer.worker.remote", "stash_scorer.worker.scoring"),
        ),
        WorkerKind(
            "gepa",
            "stash_gepa.worker",
            {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"cpu": "4", "memory": "8Gi"}},
            60 * 60,
            _GEPA_ENVIRONMENT,
            ("stash_gepa.worker.remote", "stash_gepa.worker.reward"),
        ),
    )
}


def worker_kind(name: str) -> WorkerKind:
    """The kind called `name`; InvalidArgument naming the known kinds otherwise."""
    try:
        return KINDS[name]
    except KeyError:
        raise InvalidArgument("kind", f"unknown job kind {name!r}; known kinds: {', '.join(KINDS)}") from None
