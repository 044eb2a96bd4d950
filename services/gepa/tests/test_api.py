"""A GEPA run request: the spec's defaults, and the settings refused with the field named."""

import pytest

from stash.rm.v1 import gepa_pb2
from stash_common.errors import InvalidArgument
from stash_gepa.api import DefaultModels, default_models, run_from_request


def test_only_the_reward_model_is_required_and_the_rest_has_the_specs_defaults() -> None:
    row = run_from_request(gepa_pb2.CreateGepaRunRequest(owner_id="alice", reward_model_id="m1"), "alice")

    assert (row.owner_id, row.reward_model_id, row.task_api_base) == ("alice", "m1", None)
    assert (row.task_model, row.reflection_model, row.max_metric_calls) == (
        "anthropic/claude-haiku-4-5",
        "anthropic/claude-sonnet-5",
        40,
    )


def test_an_openai_compatible_server_is_a_model_string_and_an_api_base() -> None:
    request = gepa_pb2.CreateGepaRunRequest(
        reward_model_id="m1", task_model="openai/qwen3-8b", task_api_base="http://vllm:8000/v1", max_metric_calls=80
    )

    row = run_from_request(request, "alice")

    assert (row.task_model, row.task_api_base, row.max_metric_calls) == ("openai/qwen3-8b", "http://vllm:8000/v1", 80)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({}, "reward_model_id"),
        ({"reward_model_id": "m1", "max_metric_calls": 0}, "max_metric_calls"),
        ({"reward_model_id": "m1", "max_metric_calls": 10_001}, "max_metric_calls"),
        ({"reward_model_id": "m1", "task_api_base": "vllm:8000"}, "task_api_base"),
        ({"reward_model_id": "m1", "task_model": "  "}, "task_model"),
        ({"reward_model_id": "m1", "reflection_model": "x" * 501}, "reflection_model"),
    ],
)
def test_a_bad_setting_is_refused_naming_it(fields: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidArgument) as raised:
        run_from_request(gepa_pb2.CreateGepaRunRequest(**fields), "alice")  # type: ignore[arg-type]

    assert raised.value.field == field


def test_the_default_models_need_the_anthropic_key_unless_a_reflection_api_base_serves_reflection() -> None:
    assert default_models(True, None) == DefaultModels(task_missing=None, reflection_missing=None)
    assert default_models(False, None) == DefaultModels("ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY")
    assert default_models(False, "http://vllm:8000/v1") == DefaultModels("ANTHROPIC_API_KEY", None)
