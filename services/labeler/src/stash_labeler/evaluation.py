"""Evaluate one trace revision: chunk it, label what is new, score everything, lay it out per step.

Labels come from one of three places. A trace imported with labels in its step metadata is used as
it is and never sent to a model. Otherwise the configured labeler labels the chunks that have no
kept label with the same fingerprint (the rule-based labeler relabels every chunk: it is cheap and
reads neighbouring chunks). The grading model, when configured, checks open chunks that have no
kept distribution.

Evaluating does no I/O of its own: the evaluation worker fetches the revision and the kept labels,
and `store.save_evaluations` keeps what this returns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from pydantic import ValidationError

from stash_labeler.chunks import Chunk, cut_chunks
from stash_labeler.label_schema import LabelSource, StepLabel
from stash_labeler.labeling.protocol import ChunkLabel, Labeler, LabelingError
from stash_labeler.scoring.credit import CREDIT_METHOD
from stash_labeler.scoring.grading import Grader
from stash_labeler.scoring.rule_scores import (
    ChunkScore,
    CreditReading,
    Scores,
    Term,
    credit_of,
    open_chunks,
    rule_reading,
    score,
)
from stash_labeler.traces import LabelerTrace


@dataclass(frozen=True, slots=True)
class KeptLabel:
    """A label saved by an earlier evaluation."""

    label: ChunkLabel
    distribution: dict[str, float] | None = None


@dataclass
class Evaluation:
    """One revision's result: the API body, the labels to keep, and the headline numbers.

    `label_metadata` holds each labelled chunk's label as metadata, dumped once for both the body's steps and
    the kept rows.
    """

    body: dict[str, Any]
    labels: dict[str, KeptLabel]
    label_metadata: dict[str, dict[str, object]]
    trace_score: float | None
    outcome: str
    labeler: LabelSource
    labeled_now: list[str] = field(default_factory=list)


def evaluate(
    trace: LabelerTrace,
    labeler: Labeler,
    kept: Mapping[str, KeptLabel],
    grader: Grader | None = None,
) -> Evaluation:
    """Label and score `trace`, reusing `kept` labels of unchanged chunks."""
    chunks = cut_chunks(trace)
    imported = imported_labels(chunks)
    if imported:
        labels = {chunk_id: KeptLabel(label) for chunk_id, label in imported.items()}
        labeled_now: list[str] = []
        source = LabelSource.IMPORTED
    else:
        labels, labeled_now = _label(trace, chunks, labeler, kept)
        source = labeler.source
    ordered = [labels[chunk.chunk_id].label.label for chunk in chunks if chunk.chunk_id in labels]
    if grader is not None and not imported:
        labels = _grade(trace, chunks, labels, ordered, grader)
    graded = {chunk_id: kept.distribution for chunk_id, kept in labels.items() if kept.distribution}
    scores = score(ordered, graded)
    label_metadata = {chunk_id: kept.label.label.as_metadata() for chunk_id, kept in labels.items()}
    body = {"steps": _steps(chunks, labels, label_metadata, scores), "tasks": _tasks(chunks, scores)}
    return Evaluation(body, labels, label_metadata, scores.trace_score, scores.outcome.value, source, labeled_now)


def imported_labels(chunks: Sequence[Chunk]) -> dict[str, ChunkLabel]:
    """Labels carried in step metadata, keyed by the chunk the labeled step falls in."""
    found: dict[str, ChunkLabel] = {}
    for chunk in chunks:
        for step in chunk.steps:
            carried = step.metadata.get("label")
            if carried is None or chunk.chunk_id in found:
                continue
            try:
                label = StepLabel.model_validate({**carried, "chunk_id": carried.get("chunk_id", chunk.chunk_id)})
            except (ValidationError, AttributeError) as error:
                raise LabelingError(f"step {step.index}: imported metadata.label is invalid: {error}") from None
            found[chunk.chunk_id] = ChunkLabel(label, LabelSource.IMPORTED, fingerprint=chunk.fingerprint)
    return found


def _label(
    trace: LabelerTrace, chunks: Sequence[Chunk], labeler: Labeler, kept: Mapping[str, KeptLabel]
) -> tuple[dict[str, KeptLabel], list[str]]:
    reusable = {
        chunk.chunk_id: kept[chunk.chunk_id]
        for chunk in chunks
        if labeler.source != LabelSource.RULES
        and chunk.chunk_id in kept
        and kept[chunk.chunk_id].label.fingerprint == chunk.fingerprint
        and kept[chunk.chunk_id].label.source == labeler.source
    }
    targets = [chunk.chunk_id for chunk in chunks if chunk.chunk_id not in reusable]
    known = {chunk_id: item.label.label for chunk_id, item in reusable.items()}
    fresh = labeler.label(trace, chunks, targets, known) if targets else {}
    model = getattr(labeler, "model", None)
    labels = dict(reusable)
    for chunk in chunks:
        if chunk.chunk_id in fresh:
            previous = kept.get(chunk.chunk_id)
            keep_distribution = previous is not None and previous.label.fingerprint == chunk.fingerprint
            labels[chunk.chunk_id] = KeptLabel(
                ChunkLabel(fresh[chunk.chunk_id], labeler.source, model, chunk.fingerprint),
                previous.distribution if previous and keep_distribution else None,
            )
    return labels, targets


def _grade(
    trace: LabelerTrace,
    chunks: Sequence[Chunk],
    labels: dict[str, KeptLabel],
    ordered: Sequence[StepLabel],
    grader: Grader,
) -> dict[str, KeptLabel]:
    wanted = [chunk_id for chunk_id in open_chunks(ordered) if labels[chunk_id].distribution is None]
    if not wanted:
        return labels
    plain = {chunk_id: item.label.label for chunk_id, item in labels.items()}
    distributions = grader.grade(trace, chunks, plain, wanted)
    return {
        chunk_id: KeptLabel(item.label, distributions.get(chunk_id, item.distribution))
        for chunk_id, item in labels.items()
    }


def _steps(
    chunks: Sequence[Chunk],
    labels: Mapping[str, KeptLabel],
    label_metadata: Mapping[str, dict[str, object]],
    scores: Scores,
) -> list[dict[str, Any]]:
    steps = []
    for chunk in chunks:
        kept = labels.get(chunk.chunk_id)
        labelled = _label_fields(kept.label, label_metadata[chunk.chunk_id]) if kept is not None else {}
        chunk_score = scores.chunks.get(chunk.chunk_id)
        reward = _reward(chunk_score) if chunk_score is not None else {}
        action = chunk.action  # the first step, which carries the reward
        steps.append(
            {"step_id": action.id, "step_index": action.index, "chunk_id": chunk.chunk_id, **labelled, **reward}
        )
        for step in chunk.steps[1:]:
            steps.append({"step_id": step.id, "step_index": step.index, "chunk_id": chunk.chunk_id, **labelled})
    return steps


def _label_fields(label: ChunkLabel, metadata: dict[str, object]) -> dict[str, Any]:
    """The label part of each step of a chunk (the steps of a chunk share one label)."""
    return {"label": metadata, "label_source": label.source.value, "label_model": label.model}


def _reward(chunk: ChunkScore) -> dict[str, Any]:
    if chunk.graded:
        return _reward_fields(chunk.points, chunk.passed_back, tuple(chunk.terms), chunk.reading())
    return _rule_reward(chunk.points, chunk.passed_back, tuple(chunk.terms))


@lru_cache(maxsize=4096)
def _rule_reward(points: float, passed_back: float, terms: tuple[Term, ...]) -> dict[str, Any]:
    """A rule-scored chunk's reward fields, which its points, the credit passed back and its terms decide. Rule
    scores repeat a few of them, so each is built once (built per chunk, they were an eighth of in-process
    labelling's profile); the steps that show one share its nested values, which are only read (API messages, the
    stored body).
    """
    return _reward_fields(points, passed_back, terms, rule_reading(credit_of(points, passed_back)))


def _reward_fields(
    points: float, passed_back: float, terms: tuple[Term, ...], reading: CreditReading
) -> dict[str, Any]:
    return {
        "reward": {
            "points": round(points, 6),
            "passed_back": round(passed_back, 6),
            "credit": round(reading.credit, 6),
            "terms": [{"reason": term.reason, "points": round(term.points, 6)} for term in terms],
        },
        "expected_credit": reading.expected,
        "ordinal_credit": reading.ordinal,
        "credit_distribution": reading.distribution,
        "credit_method": CREDIT_METHOD,
    }


def _tasks(chunks: Sequence[Chunk], scores: Scores) -> list[dict[str, Any]]:
    by_id = {chunk.chunk_id: chunk for chunk in chunks}
    return [
        {
            "task_id": task.task_id,
            "first_step_id": by_id[task.first_chunk_id].steps[0].id,
            "last_step_id": by_id[task.last_chunk_id].steps[-1].id,
            "answer_points": round(task.answer_points, 6),
            "work_cost": round(task.work_cost, 6),
            "score": round(task.score, 6),
            "capped": task.capped,
        }
        for task in scores.tasks
    ]
