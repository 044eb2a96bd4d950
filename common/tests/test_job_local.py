"""Local workers' share of the CPUs: their torch threads together never outnumber the usable cores."""

import pytest

from stash_common.jobs import local
from stash_common.jobs.local import shared_cpus_env


@pytest.mark.parametrize(
    ("cpus", "workers", "threads"), [(2, 2, "1"), (2, 1, "2"), (2, 3, "1"), (8, 2, "4"), (7, 2, "3")]
)
def test_shared_cpus_env_gives_each_worker_an_equal_share_of_at_least_one_cpu(
    monkeypatch: pytest.MonkeyPatch, cpus: int, workers: int, threads: str
) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(local, "usable_cpus", lambda: cpus)

    assert shared_cpus_env(workers) == {"OMP_NUM_THREADS": threads}


def test_shared_cpus_env_keeps_an_omp_num_threads_already_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "6")

    assert shared_cpus_env(2) == {}
