"""Where a job's `base_model` is on disk: a local directory, the packaged model, or the local hub cache.

Nothing is ever downloaded: a hub id resolves only when its files are already cached.
"""

from __future__ import annotations

from pathlib import Path

from stash_common.errors import InvalidArgument
from stash_common.reward_model.packaged import PACKAGED_MODEL_NAMES, packaged_model_dir


def resolve_base_model(name: str, cache_dir: Path | None = None) -> Path:
    """The local directory holding `name`'s checkpoint; `cache_dir` overrides the hub cache location."""
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise InvalidArgument("base_model", f"{path} is a directory without config.json: give a checkpoint folder")
        return path
    if name in PACKAGED_MODEL_NAMES:
        return packaged_model_dir()
    return cached_hub_model(name, cache_dir)


def cached_hub_model(repo_id: str, cache_dir: Path | None = None) -> Path:
    """The cached snapshot of a hub model, without any network access."""
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(repo_id, cache_dir=cache_dir, local_files_only=True))
    except (OSError, ValueError) as error:
        raise InvalidArgument(
            "base_model",
            f"{repo_id!r} is neither a local checkpoint directory, nor the packaged model"
            f" ({', '.join(sorted(PACKAGED_MODEL_NAMES))}), nor a hub model in the local cache;"
            " the worker never downloads: pre-fetch it into HF_HOME or pass a directory",
        ) from error
