"""The training metrics key set and the check every reported result passes."""

import pytest

from stash_common.errors import InvalidArgument
from stash_common.training_metrics import TRAINING_METRIC_KEYS, check_training_metrics


def _complete() -> dict[str, object]:
    return {key: None for key in TRAINING_METRIC_KEYS}


def test_check_training_metrics_accepts_exactly_the_key_set_with_null_values() -> None:
    check_training_metrics(_complete())


def test_check_training_metrics_names_missing_keys() -> None:
    metrics = _complete()
    del metrics["seconds"], metrics["eval_accuracy"]

    with pytest.raises(InvalidArgument, match=r"metrics: missing eval_accuracy, seconds: a training job reports"):
        check_training_metrics(metrics)


def test_check_training_metrics_names_unknown_and_missing_keys_together() -> None:
    metrics = {**_complete(), "learning_rate": 1e-4}
    del metrics["device"]

    with pytest.raises(InvalidArgument, match=r"missing device; unknown learning_rate: .*train_pairs"):
        check_training_metrics(metrics)
