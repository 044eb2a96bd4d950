"""Device selection (CUDA, then MPS, then CPU) and the CPU thread count."""

from collections.abc import Iterator

import pytest
import torch

from stash_common.reward_model.device import configure_threads, select_device, usable_cpus


@pytest.mark.parametrize(
    ("cuda", "mps", "expected"),
    [(True, True, "cuda"), (True, False, "cuda"), (False, True, "mps"), (False, False, "cpu")],
)
def test_select_device_prefers_cuda_then_mps(
    monkeypatch: pytest.MonkeyPatch, cuda: bool, mps: bool, expected: str
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)

    assert select_device() == expected


@pytest.fixture
def restore_threads() -> Iterator[None]:
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.mark.usefixtures("restore_threads")
def test_configure_threads_uses_every_usable_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    torch.set_num_threads(1)

    assert configure_threads("cpu") == usable_cpus()


@pytest.mark.usefixtures("restore_threads")
def test_configure_threads_respects_omp_num_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)

    assert configure_threads("cpu") == 1
