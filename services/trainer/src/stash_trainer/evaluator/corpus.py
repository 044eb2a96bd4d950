"""Candidate comparisons for the shared evaluator, built from consented traces.

Rules:

- Only traces a consent covers reach this module (`consent.Scope.covers`, checked by the caller that
  selects them and again here). Pairs never mix two accounts' traces.
- Explicit ratings: the personal models' step pairs (`explicit.step_pairs`) within one account.
- Corrections: a comment that quotes an action's text, not flagged as a label error, rejects that action;
  the trace's next action of the same kind without a correction of its own (the repair) is chosen. The
  comment's author is the comparison's author.
- Automatic credit: the personal models' credit pairs (`automatic.automatic_pairs`), authored by the owner.
- Every side is rendered as action input version 2: its context with system steps, then the action.
- A comparison is identified by its preference source and both sides' trace and step ids, so building
  twice adds nothing; its task groups are its traces' first user requests, normalised.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stash_common.rendering import render_action, render_context
from stash_common.steps import TraceStep
from stash_trainer.evaluator.consent import Scope
from stash_trainer.pairs.automatic import automatic_pairs
from stash_trainer.pairs.explicit import step_pairs
from stash_trainer.pairs.inputs import SourceTrace
from stash_trainer.pairs.preference import PreferencePair, pair_action_type

INPUT_VERSION = 2


@dataclass(frozen=True)
class ConsentedTrace:
    """A trace a consent covers, with whose it is and where it came from."""

    owner_id: str
    source_id: str
    source_format: str
    trace: SourceTrace


@dataclass(frozen=True)
class Side:
    """One action of a comparison: where it is and how the evaluator reads it (input version 2)."""

    trace_id: str
    step_id: str
    source_id: str
    context: str
    action: str

    @property
    def text(self) -> str:
        """The rendered example: the context, then the action."""
        return f"{self.context}\n\n{self.action}" if self.context else self.action


@dataclass(frozen=True)
class Candidate:
    """A candidate comparison: `chosen` should be the better action; it is trained on only once reviewed."""

    owner_id: str
    source_id: str
    source_format: str
    preference_source: str
    action_type: str
    author_ids: tuple[str, ...]
    task_groups: tuple[str, ...]
    chosen: Side
    rejected: Side
    evidence: Mapping[str, Any]

    @property
    def trace_ids(self) -> tuple[str, ...]:
        """The distinct traces of both sides, sorted."""
        return tuple(sorted({self.chosen.trace_id, self.rejected.trace_id}))

    @property
    def key(self) -> str:
        """What identifies the comparison across rebuilds."""
        parts = [self.preference_source, self.chosen.trace_id, self.chosen.step_id]
        parts += [self.rejected.trace_id, self.rejected.step_id]
        return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


def build_candidates(traces: Sequence[ConsentedTrace], scopes: Mapping[str, Scope]) -> list[Candidate]:
    """Every candidate comparison of the covered traces, one account at a time."""
    covered = [item for item in traces if _covered(item, scopes)]
    by_owner: dict[str, list[ConsentedTrace]] = {}
    for item in covered:
        by_owner.setdefault(item.owner_id, []).append(item)
    return [candidate for owned in by_owner.values() for candidate in _owner_candidates(owned)]


def task_group(trace: SourceTrace) -> str:
    """The trace's task group: a digest of its first user request, case and spacing normalised."""
    first = next((step.content for step in trace.steps if step.role == "user"), "")
    normalised = " ".join(first.lower().split())
    return hashlib.sha256(normalised.encode()).hexdigest()[:16]


def side(item: ConsentedTrace, step: TraceStep) -> Side:
    """An action rendered as input version 2."""
    context = render_context(item.trace.steps, step.index, with_system=True)
    return Side(item.trace.id, step.id, item.source_id, context, render_action(step))


def _covered(item: ConsentedTrace, scopes: Mapping[str, Scope]) -> bool:
    scope = scopes.get(item.owner_id)
    return scope is not None and scope.covers(item.owner_id, item.source_id)


def _owner_candidates(owned: Sequence[ConsentedTrace]) -> list[Candidate]:
    traces = {item.trace.id: item for item in owned}
    explicit = [_from_pair(traces, pair, "explicit") for pair in step_pairs([item.trace for item in owned])]
    automatic = [_from_pair(traces, pair, "automatic") for item in owned for pair in automatic_pairs([item.trace])]
    corrections = [candidate for item in owned for candidate in _corrections(item)]
    return explicit + corrections + automatic


def _from_pair(traces: Mapping[str, ConsentedTrace], pair: PreferencePair, source: str) -> Candidate:
    evidence = pair.evidence
    chosen_trace = traces[str(evidence.get("chosen_trace_id", pair.trace_ids[0]))]
    rejected_trace = traces[str(evidence.get("rejected_trace_id", pair.trace_ids[0]))]
    chosen = _step(chosen_trace.trace, str(evidence["chosen_step_id"]))
    rejected = _step(rejected_trace.trace, str(evidence["rejected_step_id"]))
    if source == "explicit":
        authors = _rating_authors(chosen_trace.trace, chosen) | _rating_authors(rejected_trace.trace, rejected)
    else:
        authors = {chosen_trace.owner_id}
    return _candidate(chosen_trace, (chosen_trace, chosen), (rejected_trace, rejected), source, authors, evidence)


def _corrections(item: ConsentedTrace) -> list[Candidate]:
    trace = item.trace
    corrected = {a.step_id: a for a in trace.annotations if a.is_correction}
    candidates = []
    for step in trace.steps:
        correction = corrected.get(step.id)
        if correction is None or not step.is_action:
            continue
        repair = _repair(trace, step, corrected)
        if repair is None:
            continue
        evidence = {"comment_id": correction.id, "comment": correction.comment, "quote": correction.quote}
        authors = {correction.author_id or item.owner_id}
        candidates.append(_candidate(item, (item, repair), (item, step), "correction", authors, evidence))
    return candidates


def _repair(trace: SourceTrace, step: TraceStep, corrected: Mapping[str | None, Any]) -> TraceStep | None:
    later = (s for s in trace.steps[step.index + 1 :] if s.is_action and s.is_tool_call == step.is_tool_call)
    return next((s for s in later if s.id not in corrected), None)


def _candidate(
    origin: ConsentedTrace,
    chosen: tuple[ConsentedTrace, TraceStep],
    rejected: tuple[ConsentedTrace, TraceStep],
    source: str,
    authors: Iterable[str],
    evidence: Mapping[str, Any],
) -> Candidate:
    (chosen_item, chosen_step), (rejected_item, rejected_step) = chosen, rejected
    groups = {task_group(chosen_item.trace), task_group(rejected_item.trace)}
    return Candidate(
        owner_id=origin.owner_id,
        source_id=origin.source_id,
        source_format=origin.source_format,
        preference_source=source,
        action_type=pair_action_type(chosen_step, rejected_step),
        author_ids=tuple(sorted(set(authors))),
        task_groups=tuple(sorted(groups)),
        chosen=side(chosen_item, chosen_step),
        rejected=side(rejected_item, rejected_step),
        evidence=json.loads(json.dumps(dict(evidence), default=str)),
    )


def _step(trace: SourceTrace, step_id: str) -> TraceStep:
    return next(step for step in trace.steps if step.id == step_id)


def _rating_authors(trace: SourceTrace, step: TraceStep) -> set[str]:
    rated = (a for a in trace.annotations if a.step_id == step.id and a.usable_rating is not None)
    return {a.author_id for a in rated if a.author_id}
