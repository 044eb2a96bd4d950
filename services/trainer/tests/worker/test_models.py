"""Base-model resolution: a local folder, the packaged MiniLM, or a hub id already in the local cache."""

from pathlib import Path

import pytest

from stash_common.errors import InvalidArgument
from stash_common.reward_model.packaged import PACKAGED_MODEL_NAMES, packaged_model_dir
from stash_trainer.worker.models import resolve_base_model


@pytest.mark.parametrize("name", sorted(PACKAGED_MODEL_NAMES))
def test_packaged_names_resolve_to_the_shipped_checkpoint(name: str) -> None:
    path = resolve_base_model(name)

    assert path == packaged_model_dir()
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {child.name for child in path.iterdir()}


def test_a_checkpoint_folder_resolves_to_itself(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")

    assert resolve_base_model(str(tmp_path)) == tmp_path


def test_a_folder_without_config_is_refused_like_a_path_that_does_not_exist(tmp_path: Path) -> None:
    refusals = []
    for name in (str(tmp_path), str(tmp_path / "missing"), "/etc"):
        with pytest.raises(InvalidArgument) as raised:
            resolve_base_model(name, cache_dir=tmp_path)
        refusals.append(raised.value.message.replace(name, "NAME"))

    assert len(set(refusals)) == 1  # the answer does not tell which paths exist
    assert refusals[0] == (
        "base_model: 'NAME' is unknown; allowed: the packaged model (all-MiniLM-L6-v2,"
        " sentence-transformers/all-MiniLM-L6-v2) or a model the operator placed on the server (nothing is downloaded)"
    )


def test_a_cached_hub_model_resolves_to_its_snapshot(tmp_path: Path) -> None:
    # The hub cache layout: models--<org>--<name>/refs/main names the snapshot folder.
    repo = tmp_path / "models--Qwen--Qwen3-0.6B"
    snapshot = repo / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("a" * 40)

    assert resolve_base_model("Qwen/Qwen3-0.6B", cache_dir=tmp_path) == snapshot


@pytest.mark.parametrize("name", ["Qwen/Qwen3-0.6B", "not a//repo id"])
def test_an_uncached_hub_model_is_refused_without_downloading(tmp_path: Path, name: str) -> None:
    with pytest.raises(InvalidArgument, match="base_model: .* is unknown; allowed: the packaged model"):
        resolve_base_model(name, cache_dir=tmp_path)
