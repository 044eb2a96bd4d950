"""Preference pairs from explicit human ratings.

Rules:

- A rating trains when it is +1 or -1 and its annotation is not flagged as a label error.
- A step's rating is the sign of the sum of its usable ratings; a tie (one + and one −) rates
  nothing. The same holds for a trace's own ratings (annotations without a step).
- Only actions are rated at step scope: assistant responses with text and assistant tool calls.
  Ratings on system, user and tool steps, or on steps the trace no longer has, are ignored.
- TraceStep scope: across all selected traces, every positively rated action × every negatively rated
  action. `chosen` is the positive action's example (prior context, then the action), `rejected`
  the negative one's; granularity "action"; action_type "tool_call" or "response" when both sides
  agree, else "mixed"; `trace_ids` the sorted distinct ids of both sides' traces.
- Trace scope: every positively rated trace × every negatively rated trace, each rendered whole
  without system steps; granularity "trace", action_type None.
- A step with any usable rating is human-rated: automatic credit and AI feedback leave it alone.
- The evidence names who rated each side (`chosen_authors`, `rejected_authors`: the owner or reviewers whose
  usable ratings decided it), whoever wrote them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from stash_common.rendering import render_trace
from stash_common.steps import TraceStep
from stash_trainer.pairs.inputs import Annotation, SourceTrace
from stash_trainer.pairs.preference import PreferencePair, action_pair, sorted_trace_ids

SOURCE = "explicit"


def explicit_pairs(traces: Sequence[SourceTrace], sections: bool = False) -> list[PreferencePair]:
    """Step-scope pairs, then trace-scope pairs, in trace and step order (`sections`: input version 3's
    marked context sections in action examples)."""
    return step_pairs(traces, sections) + trace_pairs(traces)


def step_pairs(traces: Sequence[SourceTrace], sections: bool = False) -> list[PreferencePair]:
    """Every positively rated action × every negatively rated action across the traces."""
    rated = [(trace, step, sign) for trace in traces for step, sign in rated_actions(trace)]
    positives = [(trace, step) for trace, step, sign in rated if sign > 0]
    negatives = [(trace, step) for trace, step, sign in rated if sign < 0]
    return [_step_pair(good, bad, sections) for good in positives for bad in negatives]


def trace_pairs(traces: Sequence[SourceTrace]) -> list[PreferencePair]:
    """Every positively rated trace × every negatively rated trace."""
    signs = [(trace, _sign(a.usable_rating for a in trace.annotations if a.step_id is None)) for trace in traces]
    positives = [trace for trace, sign in signs if sign > 0]
    negatives = [trace for trace, sign in signs if sign < 0]
    return [_trace_pair(good, bad) for good in positives for bad in negatives]


def rated_actions(trace: SourceTrace) -> list[tuple[TraceStep, int]]:
    """The trace's actions with a net human rating (+1 or -1), in step order."""
    by_step = _ratings_by_step(trace.annotations)
    net = ((step, _sign(by_step.get(step.id, ()))) for step in trace.steps if step.is_action)
    return [(step, sign) for step, sign in net if sign != 0]


def human_rated_step_ids(trace: SourceTrace) -> frozenset[str]:
    """Steps carrying any usable human rating, even ratings that cancel out."""
    return frozenset(_ratings_by_step(trace.annotations))


def _ratings_by_step(annotations: Iterable[Annotation]) -> dict[str, list[int]]:
    ratings: dict[str, list[int]] = {}
    for annotation in annotations:
        if annotation.step_id is not None and annotation.usable_rating is not None:
            ratings.setdefault(annotation.step_id, []).append(annotation.usable_rating)
    return ratings


def _sign(ratings: Iterable[int | None]) -> int:
    total = sum(rating for rating in ratings if rating is not None)
    return (total > 0) - (total < 0)


def raters(annotations: Iterable[Annotation], step_id: str | None) -> list[str]:
    """The names of who gave usable ratings on the step (None: on the whole trace), sorted."""
    return sorted(
        {a.author_name or a.author_id for a in annotations if a.step_id == step_id and a.usable_rating is not None}
    )


def _step_pair(
    good: tuple[SourceTrace, TraceStep], bad: tuple[SourceTrace, TraceStep], sections: bool
) -> PreferencePair:
    (good_trace, good_step), (bad_trace, bad_step) = good, bad
    evidence = {
        "source": SOURCE,
        "chosen_trace_id": good_trace.id,
        "chosen_step_id": good_step.id,
        "rejected_trace_id": bad_trace.id,
        "rejected_step_id": bad_step.id,
        "chosen_authors": raters(good_trace.annotations, good_step.id),
        "rejected_authors": raters(bad_trace.annotations, bad_step.id),
    }
    return action_pair(good, bad, evidence, sections)


def _trace_pair(good: SourceTrace, bad: SourceTrace) -> PreferencePair:
    return PreferencePair(
        chosen=render_trace(good.steps),
        rejected=render_trace(bad.steps),
        trace_ids=sorted_trace_ids(good.id, bad.id),
        granularity="trace",
        action_type=None,
        evidence={
            "source": SOURCE,
            "chosen_trace_id": good.id,
            "rejected_trace_id": bad.id,
            "chosen_authors": raters(good.annotations, None),
            "rejected_authors": raters(bad.annotations, None),
        },
    )
