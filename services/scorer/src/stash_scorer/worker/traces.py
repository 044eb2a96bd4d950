"""What the worker scores per trace, and what it reports: plain dataclasses, free of torch and gRPC.

The job's runs name the traces; `action_score_items.jsonl` and `score_items.jsonl` hold their texts.
A result carries every action's raw score and its credit, or is refused here when a score is not
finite: a NaN is never reported as a score.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from stash_common.errors import FailedPrecondition
from stash_common.reward_model.stats import RewardStats, action_credit
from stash_scorer.job_contract import ActionScoreItem, ScoreItem, ScoreJob, ScoreRun


@dataclass(frozen=True)
class TraceInput:
    """One run's texts: each eligible action's example in step order, and the whole trace (None: none)."""

    run: ScoreRun
    actions: tuple[ActionScoreItem, ...]
    trace_text: str | None


@dataclass(frozen=True)
class ActionResult:
    """One action's raw score and display credit."""

    step_id: str
    score: float
    credit: float


@dataclass(frozen=True)
class TraceResult:
    """A scored trace: its actions in step order and its trace-level score (None without a trace text)."""

    run: ScoreRun
    actions: tuple[ActionResult, ...]
    trace_score: float | None


def trace_inputs(job: ScoreJob, actions: Sequence[ActionScoreItem], traces: Sequence[ScoreItem]) -> list[TraceInput]:
    """One input per run, in the job's order, with that trace's items in file order."""
    texts = {item.trace_id: item.text for item in traces}
    return [
        TraceInput(run, tuple(item for item in actions if item.trace_id == run.trace_id), texts.get(run.trace_id))
        for run in job.runs
    ]


def trace_result(
    trace: TraceInput, scores: Sequence[float], trace_score: float | None, stats: RewardStats
) -> TraceResult:
    """The report of a scored trace; FailedPrecondition naming the step when a score is not finite."""
    for item, score in zip(trace.actions, scores, strict=True):
        if not math.isfinite(score):
            raise FailedPrecondition(f"the reward model gave step {item.step_id} a non-finite score ({score})")
    if trace_score is not None and not math.isfinite(trace_score):
        raise FailedPrecondition(f"the reward model gave trace {trace.run.trace_id} a non-finite score")
    results = tuple(
        ActionResult(item.step_id, score, action_credit(score, stats))
        for item, score in zip(trace.actions, scores, strict=True)
    )
    return TraceResult(trace.run, results, trace_score)
