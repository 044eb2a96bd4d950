"""The accelerator to run a reward model on (CUDA, then MPS, then CPU) and the CPU thread count."""

from __future__ import annotations

import os

import torch

from stash_common.jobs.local import usable_cpus


def select_device() -> str:
    """`cuda` when a CUDA device is visible, else `mps` on Apple silicon, else `cpu`."""
    if torch.cuda.is_available():
        return "cuda"
    if torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def configure_threads(device: str) -> int:
    """Use one intra-op thread per usable CPU on `cpu`, unless OMP_NUM_THREADS says otherwise."""
    if device == "cpu" and "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(usable_cpus())
    return torch.get_num_threads()
