"""Step scores by fixed rules: the same labels always give the same scores.

- Work costs points: a lookup −0.03, a change −0.05, a question to the user −0.05; a result of
  `error` adds −0.10 and a repeat of an earlier call (`duplicate_of`) adds −0.10. Narration costs nothing
  but pays the same extras.
- An answer earns points by how the user reacted (the user label whose `verdict_target` names it):
  `ANSWER_POINTS`, from +1.0 (accepted, stated with confidence) down to −1.0 (rejected, stated with
  confidence). An answer nobody reacted to earns `UNCONFIRMED_POINTS` by what it claims.
- Quality checks (optional): where the labels leave the outcome open — a tool call, a question, an
  answer nobody reacted to — a grading model's distribution over the five credit labels replaces the
  rule points with the options' points blended by probability. The bounds keep the order fixed: an
  unconfirmed answer stays below every accepted one and work never scores above zero.
- Credit flows back: an answer the user reacted to passes `0.3 × points × 0.8^k` to the agent chunk
  `k` places before it in the same task (k = 0 is the nearest earlier one).
- A chunk's credit is its points plus the credit passed back, capped to −1..+1.
- A task's score is its final answer's points plus the cost of its work, capped to −1..+1. A task
  without an answer has no score.
- The trace score is the mean of the task scores. The outcome is read from the final answers:
  `success` when their points average 0.5 or more, `failure` below zero, `partial_success` in
  between, `insufficient_evidence` when no task has an answer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple

from stash_labeler.label_schema import StepLabel
from stash_labeler.scoring.credit import (
    ANCHORS,
    anchored_distribution,
    anchored_expected_credit,
    expected_credit,
    ordinal_credit,
)

WORK_COSTS: dict[str, float] = {"lookup": -0.03, "change": -0.05, "question": -0.05, "message": 0.0}
ERROR_COST = -0.10
REPEAT_COST = -0.10
ANSWER_POINTS: dict[tuple[str, str], float] = {
    ("accepted", "confident"): 1.0,
    ("accepted", "hedged"): 0.8,
    ("accepted", "none"): 0.8,
    ("partially_accepted", "confident"): 0.4,
    ("partially_accepted", "hedged"): 0.3,
    ("partially_accepted", "none"): 0.3,
    ("rejected", "hedged"): -0.6,
    ("rejected", "none"): -0.6,
    ("rejected", "confident"): -1.0,
}
UNCONFIRMED_POINTS: dict[str, float] = {"done": 0.2, "partial": 0.1, "none": 0.0, "failed": -0.3}
PASS_BACK_SHARE = 0.3
PASS_BACK_DECAY = 0.8
SUCCESS_AT = 0.5
# Graded points of an unconfirmed answer per credit label; the top stays below the lowest accepted
# answer (0.8) and below the success threshold, since nobody confirmed it.
UNCONFIRMED_GRADED_POINTS: dict[str, float] = {
    "strongly_negative": -0.5,
    "negative": -0.2,
    "neutral": 0.0,
    "positive": 0.25,
    "strongly_positive": 0.45,
}
# Graded work: the rule cost made worse for a poor call, given back for a necessary one, never above zero.
GRADED_WORK_EXTRA: dict[str, float] = {"strongly_negative": -0.15, "negative": -0.05}
GRADED_WORK_COST_KEPT: dict[str, float] = {"neutral": 1.0, "positive": 0.5, "strongly_positive": 0.0}


class Outcome(StrEnum):
    """What the final answers say about the trace."""

    SUCCESS = "success"
    PARTIAL_SUCCESS = "partial_success"
    FAILURE = "failure"
    INSUFFICIENT_EVIDENCE = "insufficient_evidence"


@dataclass(frozen=True, slots=True)
class Term:
    """One line of a score breakdown."""

    reason: str
    points: float


@dataclass(slots=True)
class ChunkScore:
    """The score of one agent chunk (`steps[].metadata.reward` of its action step)."""

    chunk_id: str
    task_id: str
    points: float
    terms: list[Term]
    distribution: dict[str, float] | None
    graded: bool = False
    passed_back: float = 0.0

    @property
    def credit(self) -> float:
        """Points plus credit passed back, capped to −1..+1."""
        return credit_of(self.points, self.passed_back)

    def reading(self) -> CreditReading:
        """The credit and how it reads, each computed once (the reward block shows all four): a graded chunk
        reads the grading model's distribution, a rule score the anchors around its credit."""
        credit = self.credit
        if self.graded and self.distribution:
            return CreditReading(credit, expected_credit(self.distribution), ordinal_credit(credit), self.distribution)
        return rule_reading(credit)


class CreditReading(NamedTuple):
    """A chunk's credit, its probability-weighted value (rule scores: equal to `credit`), its legacy −2..2 band
    and the distribution saved for it."""

    credit: float
    expected: float | None
    ordinal: int
    distribution: dict[str, float]


def credit_of(points: float, passed_back: float) -> float:
    """A chunk's credit: its points plus the credit passed back to it, capped to −1..+1."""
    return _cap(points + passed_back)


def rule_reading(credit: float) -> CreditReading:
    """How a rule score's credit reads: the anchors around it."""
    return CreditReading(
        credit, anchored_expected_credit(credit), ordinal_credit(credit), anchored_distribution(credit)
    )


@dataclass(frozen=True, slots=True)
class TaskResult:
    """A task's score (one entry of `step_scores`)."""

    task_id: str
    first_chunk_id: str
    last_chunk_id: str
    answer_points: float
    work_cost: float
    score: float
    capped: bool


@dataclass
class Scores:
    """Everything the rules derive from one trace's labels."""

    chunks: dict[str, ChunkScore] = field(default_factory=dict)
    tasks: list[TaskResult] = field(default_factory=list)
    trace_score: float | None = None
    outcome: Outcome = Outcome.INSUFFICIENT_EVIDENCE


def open_chunks(labels: Sequence[StepLabel]) -> list[str]:
    """Chunks whose outcome the labels leave open: tool calls, questions, answers nobody reacted to."""
    reactions = _reactions(labels)
    return [
        label.chunk_id
        for label in labels
        if label.actor == "agent"
        and (label.type in ("lookup", "change", "question") or (label.is_answer and label.chunk_id not in reactions))
    ]


def score(labels: Sequence[StepLabel], graded: Mapping[str, Mapping[str, float]] | None = None) -> Scores:
    """Score a trace's labels, in chunk order; `graded` holds grading-model distributions by chunk id."""
    graded = graded or {}
    reactions = _reactions(labels)
    scores = Scores()
    for label in labels:
        if label.actor == "agent":
            scores.chunks[label.chunk_id] = _chunk_score(label, reactions.get(label.chunk_id), graded)
    _pass_credit_back(labels, reactions, scores.chunks)
    scores.tasks = _task_results(labels, scores.chunks)
    if scores.tasks:
        scores.trace_score = math.fsum(task.score for task in scores.tasks) / len(scores.tasks)
        scores.outcome = _outcome([task.answer_points for task in scores.tasks])
    return scores


def _reactions(labels: Sequence[StepLabel]) -> dict[str, StepLabel]:
    """The user reaction to each answer: the first user verdict naming it."""
    reactions: dict[str, StepLabel] = {}
    for label in labels:
        if label.reacted and label.verdict_target is not None:
            reactions.setdefault(label.verdict_target, label)
    return reactions


def _chunk_score(label: StepLabel, reaction: StepLabel | None, graded: Mapping[str, Mapping[str, float]]) -> ChunkScore:
    terms = _answer_terms(label, reaction) if label.is_answer else _work_terms(label)
    rule_points = math.fsum(term.points for term in terms)
    distribution = graded.get(label.chunk_id) if (not label.is_answer or reaction is None) else None
    blended = _graded_points(label, rule_points, distribution) if distribution else None
    if blended is None:
        return ChunkScore(label.chunk_id, label.task_id, _cap(rule_points), terms, None)
    terms = [*terms, Term("quality check", blended - rule_points)]
    return ChunkScore(label.chunk_id, label.task_id, blended, terms, dict(distribution or {}), graded=True)


def _work_terms(label: StepLabel) -> list[Term]:
    kind = label.type or "message"
    terms = [WORK_TERMS[kind]] if kind in WORK_TERMS else []
    if label.result == "error":
        terms.append(ERROR_TERM)
    if label.duplicate_of:
        terms.append(Term(f"repeat of {label.duplicate_of}", REPEAT_COST))
    return terms


def _answer_terms(answer: StepLabel, reaction: StepLabel | None) -> list[Term]:
    if reaction is None or reaction.verdict is None or reaction.verdict == "none":
        return [UNCONFIRMED_TERMS[answer.outcome or "none"]]
    return [ANSWER_TERMS[(reaction.verdict, answer.stance or "none")]]


# The terms the rules give, built once: terms are immutable, and every chunk of every trace reads one of these.
WORK_TERMS = {kind: Term(kind, cost) for kind, cost in WORK_COSTS.items() if cost}
ERROR_TERM = Term("error", ERROR_COST)
UNCONFIRMED_TERMS = {
    outcome: Term(f"answer unconfirmed, claims {outcome}", points) for outcome, points in UNCONFIRMED_POINTS.items()
}
ANSWER_TERMS = {
    (verdict, stance): Term(f"answer {verdict} ({stance})", points)
    for (verdict, stance), points in ANSWER_POINTS.items()
}


def _graded_points(label: StepLabel, rule_points: float, distribution: Mapping[str, float]) -> float | None:
    """The options' points blended by probability, within the bounds; None for an unusable distribution."""
    if expected_credit(distribution) is None:
        return None
    options = UNCONFIRMED_GRADED_POINTS if label.is_answer else _work_options(rule_points)
    weights = {name: distribution.get(name, 0.0) for name in ANCHORS}
    blended = math.fsum(p * options[name] for name, p in weights.items()) / math.fsum(weights.values())
    upper = max(UNCONFIRMED_GRADED_POINTS.values()) if label.is_answer else 0.0
    return max(-1.0, min(upper, blended))


def _work_options(cost: float) -> dict[str, float]:
    return {
        **{name: cost + extra for name, extra in GRADED_WORK_EXTRA.items()},
        **{name: cost * kept for name, kept in GRADED_WORK_COST_KEPT.items()},
    }


def _pass_credit_back(
    labels: Sequence[StepLabel], reactions: Mapping[str, StepLabel], chunks: dict[str, ChunkScore]
) -> None:
    earlier_by_task: dict[str, list[ChunkScore]] = {}
    for label in labels:
        if label.actor != "agent":
            continue
        earlier = earlier_by_task.setdefault(label.task_id, [])
        chunk = chunks[label.chunk_id]
        if label.is_answer and label.chunk_id in reactions:
            for k, before in enumerate(reversed(earlier)):
                before.passed_back += PASS_BACK_SHARE * chunk.points * PASS_BACK_DECAY**k
        earlier.append(chunk)


def _task_results(labels: Sequence[StepLabel], chunks: Mapping[str, ChunkScore]) -> list[TaskResult]:
    by_task: dict[str, list[StepLabel]] = {}
    for label in labels:
        by_task.setdefault(label.task_id, []).append(label)
    results = []
    for task_id, members in by_task.items():
        answers = [label for label in members if label.is_answer]
        if not answers:
            continue
        answer_points = chunks[answers[-1].chunk_id].points
        work = math.fsum(chunks[m.chunk_id].points for m in members if m.actor == "agent" and not m.is_answer)
        raw = answer_points + work
        results.append(
            TaskResult(
                task_id, members[0].chunk_id, members[-1].chunk_id, answer_points, work, _cap(raw), _cap(raw) != raw
            )
        )
    return results


def _outcome(final_answer_points: Sequence[float]) -> Outcome:
    mean = math.fsum(final_answer_points) / len(final_answer_points)
    if mean >= SUCCESS_AT:
        return Outcome.SUCCESS
    if mean < 0:
        return Outcome.FAILURE
    return Outcome.PARTIAL_SUCCESS


def _cap(value: float) -> float:
    return max(-1.0, min(1.0, value))
