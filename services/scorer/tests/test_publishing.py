"""What may be published for a trace: exactly its eligible actions, finite scores, credit within -1..+1."""

import math

import pytest

from stash_common.errors import InvalidArgument
from stash_scorer.inputs import ScorerTrace
from stash_scorer.publishing import ActionResult, check_scores
from stash_scorer.store import PublishedAction
from support.steps import SUPPORT, build_steps

TRACE = ScorerTrace(id="t", owner_id="o", revision=3, steps=build_steps("t", SUPPORT))
ACTIONS = ("t:2", "t:4", "t:6")  # the lookup, the wrong answer and the repair; never a tool result or user step


def _results(*overrides: ActionResult) -> list[ActionResult]:
    results = {step_id: ActionResult(step_id, 0.25 * number, 0.1 * number) for number, step_id in enumerate(ACTIONS)}
    results.update({result.step_id: result for result in overrides})
    return list(results.values())


def test_every_eligible_action_is_published_in_step_order_whatever_order_it_was_reported_in() -> None:
    published = check_scores(TRACE, list(reversed(_results())), 1.5)

    assert published == [
        PublishedAction("t:2", 2, 0.0, 0.0),
        PublishedAction("t:4", 4, 0.25, 0.1),
        PublishedAction("t:6", 6, 0.5, 0.2),
    ]


@pytest.mark.parametrize(
    ("results", "field", "reason"),
    [
        (
            _results(ActionResult("t:4", math.nan, 0.0)),
            r"action_scores\[1\]\.score",
            "must be a finite number, not nan",
        ),
        (_results(ActionResult("t:4", math.inf, 0.0)), r"action_scores\[1\]\.score", "not inf"),
        (_results(ActionResult("t:4", 1.0, 1.5)), r"action_scores\[1\]\.credit", r"must be within -1\.\.\+1, not 1\.5"),
        (_results(ActionResult("t:4", 1.0, -1.01)), r"action_scores\[1\]\.credit", "not -1.01"),
        (_results(ActionResult("t:4", 1.0, math.nan)), r"action_scores\[1\]\.credit", "not nan"),
        ([*_results(), ActionResult("elsewhere", 1.0, 0.0)], r"action_scores\[3\]\.step_id", "step elsewhere is not"),
        ([*_results(), ActionResult("t:3", 1.0, 0.0)], r"action_scores\[3\]\.step_id", "step t:3 is not an assistant"),
        ([*_results(), ActionResult("t:2", 1.0, 0.0)], r"action_scores\[3\]\.step_id", "reported twice"),
        (_results()[:2], "action_scores", "no score for the actions t:6 of trace t"),
    ],
)
def test_a_result_that_is_not_exactly_the_eligible_actions_with_sound_values_is_refused(
    results: list[ActionResult], field: str, reason: str
) -> None:
    with pytest.raises(InvalidArgument, match=rf"^{field}: .*{reason}"):
        check_scores(TRACE, results, 1.5)


def test_a_trace_score_must_be_finite() -> None:
    with pytest.raises(InvalidArgument, match=r"^trace_score: must be a finite number, not nan$"):
        check_scores(TRACE, _results(), math.nan)


def test_a_model_without_action_scoring_publishes_only_its_trace_score() -> None:
    assert check_scores(TRACE, [], 0.5, scores_actions=False) == []
    with pytest.raises(InvalidArgument, match="the model has no action scoring"):
        check_scores(TRACE, _results(), 0.5, scores_actions=False)
