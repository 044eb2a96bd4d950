"""PRMConfig: defaults, round trips and clear rejections."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from stash_labeler.prm.config import PRMConfig


def test_defaults_make_no_llm_calls() -> None:
    config = PRMConfig()
    assert (config.strategy, config.ml_threshold, config.ml_min_events) == ("rules", 0.7, 3)


def test_round_trip_through_json_and_python() -> None:
    config = PRMConfig(strategy="rules+ml", ml_threshold=0.75, ml_min_events=5)
    assert PRMConfig.model_validate_json(config.model_dump_json()) == config
    assert PRMConfig.model_validate(config.model_dump()) == config
    assert config.model_dump() == {"strategy": "rules+ml", "ml_threshold": 0.75, "ml_min_events": 5}


def test_boundaries_are_accepted() -> None:
    assert PRMConfig(ml_threshold=0.0, ml_min_events=1).ml_threshold == 0.0
    assert PRMConfig(ml_threshold=1.0).ml_threshold == 1.0


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"ml_threshold": 1.5}, "ml_threshold"),
        ({"ml_threshold": -0.1}, "ml_threshold"),
        ({"ml_min_events": 0}, "ml_min_events"),
        ({"strategy": "ml-only"}, "strategy"),
        ({"ml_treshold": 0.8}, "ml_treshold"),
    ],
)
def test_invalid_values_and_unknown_keys_are_rejected_naming_the_field(values: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as raised:
        PRMConfig.model_validate(values)
    assert [error["loc"] for error in raised.value.errors()] == [(field,)]
    assert field in str(raised.value)


def test_extra_keys_are_rejected_as_forbidden() -> None:
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        PRMConfig.model_validate_json('{"strategy": "rules", "enabled": true}')
