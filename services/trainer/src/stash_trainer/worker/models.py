"""Where a job's `base_model` is on disk: a local checkpoint directory, the packaged model, or the local hub cache.

Nothing is ever downloaded: a hub id resolves only when its files are already cached. Whatever does not
resolve gets one and the same refusal, which names the allowed names: a caller must not learn from the
answer which paths exist on the server (a directory without a checkpoint used to be told apart).
"""

from __future__ import annotations

from pathlib import Path

from stash_common.errors import InvalidArgument
from stash_common.reward_model.packaged import PACKAGED_MODEL_NAMES, packaged_model_dir


def resolve_base_model(name: str, cache_dir: Path | None = None) -> Path:
    """The local directory holding `name`'s checkpoint; `cache_dir` overrides the hub cache location."""
    path = Path(name).expanduser()
    if (path / "config.json").is_file():
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
            f"{repo_id!r} is unknown; allowed: the packaged model ({', '.join(sorted(PACKAGED_MODEL_NAMES))}) or"
            " a model the operator placed on the server (nothing is downloaded)",
        ) from error
