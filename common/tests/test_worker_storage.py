"""Checkpoint archives: stored by the training worker, fetched by the scoring and GEPA workers."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from stash_common.errors import FailedPrecondition, NotFound
from stash_common.storage import LocalObjectStore
from stash_common.worker_storage import ARCHIVE_DIR, fetch_checkpoint, store_checkpoint

KEY = "reward-models/owner/model.tar.gz"
WEIGHTS = bytes(range(256)) * 4096  # 1 MiB that gzip would shrink


@pytest.fixture
def objects(tmp_path: Path) -> LocalObjectStore:
    return LocalObjectStore(tmp_path / "objects", "http://stash.example", b"k" * 32)


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    model_dir = tmp_path / "trained" / "model"
    model_dir.mkdir(parents=True)
    (model_dir / "config.json").write_text('{"architectures": ["BertForSequenceClassification"]}')
    (model_dir / "model.safetensors").write_bytes(WEIGHTS)
    return model_dir


def test_a_stored_checkpoint_comes_back_file_for_file(
    objects: LocalObjectStore, checkpoint: Path, tmp_path: Path
) -> None:
    store_checkpoint(objects, KEY, checkpoint)

    fetched = fetch_checkpoint(objects, "model", KEY, tmp_path / "scratch")

    assert fetched == tmp_path / "scratch" / ARCHIVE_DIR
    assert (fetched / "model.safetensors").read_bytes() == WEIGHTS
    assert (fetched / "config.json").read_text() == (checkpoint / "config.json").read_text()
    assert not (tmp_path / "scratch" / "checkpoint.tar.gz").exists()


def test_the_archive_is_gzip_without_compression_work(objects: LocalObjectStore, checkpoint: Path) -> None:
    store_checkpoint(objects, KEY, checkpoint)

    stored = objects.root / KEY
    assert stored.read_bytes()[:2] == b"\x1f\x8b"  # gzip, as archives stored before were
    assert stored.stat().st_size > len(WEIGHTS)  # stored blocks: the weights were not compressed


def test_an_archive_compressed_by_an_earlier_version_is_still_fetched(
    objects: LocalObjectStore, checkpoint: Path, tmp_path: Path
) -> None:
    earlier = tmp_path / "earlier.tar.gz"
    with tarfile.open(earlier, "w:gz", compresslevel=9) as tar:
        tar.add(checkpoint, arcname=ARCHIVE_DIR)
    objects.put_file(KEY, earlier)

    fetched = fetch_checkpoint(objects, "model", KEY, tmp_path / "scratch")

    assert (fetched / "model.safetensors").read_bytes() == WEIGHTS


def test_a_missing_archive_or_one_without_a_config_says_to_train_again(
    objects: LocalObjectStore, checkpoint: Path, tmp_path: Path
) -> None:
    with pytest.raises(NotFound, match="checkpoint of reward model gone is missing .*train the model again"):
        fetch_checkpoint(objects, "gone", KEY, tmp_path / "first")

    (checkpoint / "config.json").unlink()
    store_checkpoint(objects, KEY, checkpoint)
    with pytest.raises(FailedPrecondition, match="holds no model/config.json: train the model again"):
        fetch_checkpoint(objects, "model", KEY, tmp_path / "second")
