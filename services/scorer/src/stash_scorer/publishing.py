"""What may be published for a trace: exactly its eligible actions, finite scores, credit within −1..+1.

Scores come from two places, a scoring worker's report and a succeeded training job's own scores, and
both are held to this one check against the trace as ingest has it now. A result that fails it is never
partly stored: the caller fails the run with the reason and publishes nothing, so a trace shows either a
model's complete, current scores or its previous ones.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from stash_common.errors import InvalidArgument
from stash_common.steps import TraceStep
from stash_scorer.inputs import ScorerTrace
from stash_scorer.store import PublishedAction

MAX_NAMED = 5  # step ids named in a message about missing actions; the rest are counted


@dataclass(frozen=True)
class ActionResult:
    """A reported score of one action: the raw reward and its display credit."""

    step_id: str
    score: float
    credit: float


def check_scores(
    trace: ScorerTrace, actions: Sequence[ActionResult], trace_score: float | None, scores_actions: bool = True
) -> list[PublishedAction]:
    """The results as publishable action scores in step order; InvalidArgument names the first problem.

    With `scores_actions` false (a model trained without action comparisons) no action may be reported.
    """
    if trace_score is not None and not math.isfinite(trace_score):
        raise InvalidArgument("trace_score", f"must be a finite number, not {trace_score}")
    if not scores_actions:
        if actions:
            raise InvalidArgument("action_scores", "the model has no action scoring, so it reports no action scores")
        return []
    eligible = {step.id: step for step in trace.actions}
    published: dict[str, PublishedAction] = {}
    for position, result in enumerate(actions):
        action = _checked(f"action_scores[{position}]", trace, eligible.get(result.step_id), result)
        if action.step_id in published:
            raise InvalidArgument(f"action_scores[{position}].step_id", f"step {result.step_id} is reported twice")
        published[action.step_id] = action
    missing = [step_id for step_id in eligible if step_id not in published]
    if missing:
        raise InvalidArgument("action_scores", f"no score for {_listed(missing)} of trace {trace.id}")
    return sorted(published.values(), key=lambda action: action.step_index)


def _checked(field: str, trace: ScorerTrace, step: TraceStep | None, result: ActionResult) -> PublishedAction:
    if step is None:
        raise InvalidArgument(
            f"{field}.step_id",
            f"step {result.step_id} is not an assistant response or tool call of trace {trace.id} "
            f"at revision {trace.revision}",
        )
    _check_value(f"{field}.score", result.score, None)
    _check_value(f"{field}.credit", result.credit, 1.0)
    return PublishedAction(step.id, step.index, result.score, result.credit)


def _check_value(field: str, value: float, bound: float | None) -> None:
    if not math.isfinite(value):
        raise InvalidArgument(field, f"must be a finite number, not {value}")
    if bound is not None and not -bound <= value <= bound:
        raise InvalidArgument(field, f"must be within -{bound:g}..+{bound:g}, not {value}")


def _listed(step_ids: Sequence[str]) -> str:
    named = ", ".join(step_ids[:MAX_NAMED])
    more = len(step_ids) - MAX_NAMED
    return f"the actions {named}" + (f" and {more} more" if more > 0 else "")
