"""ScorerSettings: the embedded defaults, and what the cluster profile refuses to start without."""

from pathlib import Path

import pytest

from stash_common.errors import ConfigError
from stash_common.settings import load
from stash_scorer.settings import ScorerSettings


def test_the_embedded_profile_scores_in_batches_of_eight_two_at_a_time_after_a_30_second_debounce(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STASH_DATA_DIR", str(tmp_path))

    settings = load(ScorerSettings)

    assert settings.database_url == f"sqlite:///{tmp_path / 'scorer.db'}"
    assert settings.redis_url is None
    assert settings.artifact_dir == tmp_path / "scoring-jobs"
    assert (settings.debounce_s, settings.max_active_batches, settings.batch_traces) == (30.0, 2, 8)
    assert (settings.max_attempts, settings.max_length, settings.port) == (3, 1024, 50054)


def test_the_cluster_profile_names_the_variables_it_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STASH_PROFILE", "cluster")

    with pytest.raises(ConfigError) as raised:
        load(ScorerSettings)

    assert "STASH_SCORER_DATABASE_URL is not set (PostgreSQL URL for the scorer's" in str(raised.value)
    assert "STASH_SCORER_REDIS_URL is not set" in str(raised.value)


def test_every_setting_is_read_from_its_scorer_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STASH_SCORER_DEBOUNCE_S", "5")
    monkeypatch.setenv("STASH_SCORER_MAX_ACTIVE_BATCHES", "1")
    monkeypatch.setenv("STASH_SCORER_ARTIFACT_DIR", "/scratch")

    settings = load(ScorerSettings)

    assert (settings.debounce_s, settings.max_active_batches, settings.artifact_dir) == (5.0, 1, Path("/scratch"))
