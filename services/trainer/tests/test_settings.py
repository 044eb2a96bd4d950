"""The trainer's device setting: `auto` unless STASH_TRAINER_DEVICE pins one, and an unknown one is refused."""

from pathlib import Path

import pytest

from stash_common.errors import ConfigError
from stash_common.settings import load
from stash_trainer.main import job_settings
from stash_trainer.settings import TrainerSettings


def test_jobs_pick_their_device_unless_told(tmp_path: Path) -> None:
    assert job_settings(load(TrainerSettings, data_dir=tmp_path)).device == "auto"


def test_the_device_variable_reaches_every_job(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("STASH_TRAINER_DEVICE", "cpu")

    assert job_settings(load(TrainerSettings, data_dir=tmp_path)).device == "cpu"


def test_an_unknown_device_names_the_variable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("STASH_TRAINER_DEVICE", "tpu")

    with pytest.raises(ConfigError, match="STASH_TRAINER_DEVICE is invalid"):
        load(TrainerSettings, data_dir=tmp_path)
