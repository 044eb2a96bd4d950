"""Pairs from the labeler's expected credit, and the training configuration that asks for them."""

from __future__ import annotations

import pytest

from stash_common.errors import InvalidArgument
from stash_common.rendering import render_example
from stash_trainer.pairs.automatic import (
    CREDIT_MARGIN,
    TrainingConfig,
    automatic_pairs,
    parse_training_config,
    recorded_training_config,
    sampled_action_ids,
)


def test_automatic_pairs_prefer_the_higher_credit_and_record_it(make_trace, support_specs) -> None:
    trace = make_trace("t1", support_specs, credits={2: 0.5, 4: -0.5, 6: 0.35})

    pairs = automatic_pairs([trace])

    assert [(p.chosen, p.rejected) for p in pairs] == [
        (render_example(trace.steps, 2, sections=True), render_example(trace.steps, 4, sections=True)),
        (render_example(trace.steps, 6, sections=True), render_example(trace.steps, 4, sections=True)),
    ]
    assert pairs[1].evidence == {
        "source": "automatic",
        "chosen_step_id": "t1:6",
        "rejected_step_id": "t1:4",
        "chosen_credit": 0.35,
        "rejected_credit": -0.5,
        "credit_method": "probability_weighted_v1",
    }
    assert [(p.granularity, p.action_type, p.trace_ids) for p in pairs] == [
        ("action", "mixed", ("t1",)),
        ("action", "response", ("t1",)),
    ]


def test_automatic_pairs_need_credits_at_least_the_margin_apart(make_trace, support_specs) -> None:
    at_margin = make_trace("t1", support_specs, credits={4: 0.1, 6: 0.35})
    below = make_trace("t2", support_specs, credits={4: 0.1, 6: 0.34})

    assert CREDIT_MARGIN == 0.25
    assert len(automatic_pairs([at_margin])) == 1
    assert automatic_pairs([below]) == []


def test_unscored_actions_never_pair(make_trace, support_specs) -> None:
    trace = make_trace("t1", support_specs, credits={2: None, 4: -1.0, 6: 1.0})

    (pair,) = automatic_pairs([trace])

    assert (pair.evidence["chosen_step_id"], pair.evidence["rejected_step_id"]) == ("t1:6", "t1:4")


def test_automatic_pairs_stay_within_one_trace(make_trace, support_specs) -> None:
    assert (
        automatic_pairs(
            [make_trace("t1", support_specs, credits={4: -1.0}), make_trace("t2", support_specs, credits={6: 1.0})]
        )
        == []
    )


def test_credits_of_steps_that_are_not_actions_are_ignored(make_trace, support_specs) -> None:
    assert automatic_pairs([make_trace("t1", support_specs, credits={5: -1.0, 6: 1.0, 7: 0.0})]) == []


def test_human_rated_actions_are_left_out_of_automatic_pairs(make_trace, support_specs) -> None:
    trace = make_trace("t1", support_specs, ratings={4: 1}, credits={2: 0.0, 4: -1.0, 6: 1.0})

    (pair,) = automatic_pairs([trace])

    assert (pair.evidence["chosen_step_id"], pair.evidence["rejected_step_id"]) == ("t1:6", "t1:2")


UI_CONFIG = {"input_version": 3, "annotation_source": "automatic"}


def test_parse_training_config_accepts_what_the_ui_submits() -> None:
    config = parse_training_config({"input_version": 3, "annotation_source": "automatic"})

    assert config == TrainingConfig(input_version=3, annotation_source="automatic")
    assert parse_training_config(None) is None


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"input_version": 2, "annotation_source": "automatic"}, "training_config.input_version"),
        ({"input_version": "3", "annotation_source": "automatic"}, "training_config.input_version"),
        ({"input_version": 3, "annotation_source": "manual"}, "training_config.annotation_source"),
        ({"input_version": 3}, "training_config.annotation_source"),
        ({"input_version": 3, "annotation_source": "automatic", "criteria": []}, "training_config.criteria"),
        ({**UI_CONFIG, "criteria": ["  "]}, "training_config.criteria.0"),
        ({**UI_CONFIG, "criteria": ["c"] * 9}, "training_config.criteria"),
        ({**UI_CONFIG, "max_actions_per_trace": 0}, "training_config.max_actions_per_trace"),
        ({**UI_CONFIG, "max_actions_per_trace": 2.5}, "training_config.max_actions_per_trace"),
        ({**UI_CONFIG, "action_sample_seed": -1}, "training_config.action_sample_seed"),
        ([3, "automatic"], "training_config"),
    ],
)
def test_parse_training_config_rejects_other_shapes_naming_the_field(raw: object, field: str) -> None:
    with pytest.raises(InvalidArgument, match='supported configuration is {"input_version": 3') as caught:
        parse_training_config(raw)  # type: ignore[arg-type]

    assert caught.value.field == field


def test_the_recorded_configuration_draws_a_seed_for_sampled_actions_and_keeps_a_given_one() -> None:
    # A protobuf Struct carries numbers as floats: 2.0 is read as 2.
    drawn = recorded_training_config({**UI_CONFIG, "max_actions_per_trace": 2.0, "criteria": [" cites the order "]})
    given = recorded_training_config({**UI_CONFIG, "max_actions_per_trace": 2, "action_sample_seed": 7.0})

    assert drawn["max_actions_per_trace"] == 2 and isinstance(drawn["action_sample_seed"], int)
    assert drawn["criteria"] == ["cites the order"]
    assert given == {**UI_CONFIG, "max_actions_per_trace": 2, "action_sample_seed": 7}
    assert recorded_training_config(UI_CONFIG) == UI_CONFIG and recorded_training_config(None) == {}


def test_sampled_actions_are_a_seeded_subset_of_the_limit_and_automatic_pairs_keep_to_it(
    make_trace, support_specs
) -> None:
    trace = make_trace("t1", support_specs, credits={2: 1.0, 4: -0.5, 6: 0.35})  # every two pair
    config = TrainingConfig(
        input_version=3, annotation_source="automatic", max_actions_per_trace=2, action_sample_seed=3
    )

    sampled = sampled_action_ids(trace, config)

    assert sampled is not None and len(sampled) == 2 and sampled <= {"t1:2", "t1:4", "t1:6"}
    assert sampled == sampled_action_ids(trace, config)  # a retry samples the same actions
    seeds = range(20)
    samples = {sampled_action_ids(trace, config.model_copy(update={"action_sample_seed": seed})) for seed in seeds}
    assert len(samples) > 1
    (pair,) = automatic_pairs([trace], config=config)
    assert {pair.evidence["chosen_step_id"], pair.evidence["rejected_step_id"]} == sampled
    assert sampled_action_ids(trace, config.model_copy(update={"max_actions_per_trace": 3})) is None
