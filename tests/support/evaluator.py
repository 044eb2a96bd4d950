"""Consented traces from short specs for the shared evaluator's tests, and a reader of them."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import Session, sessionmaker

from stash_common.db import transaction
from stash_trainer.evaluator import consent, review
from stash_trainer.evaluator.collection import collect
from stash_trainer.evaluator.consent import Scope
from stash_trainer.evaluator.corpus import ConsentedTrace, task_group
from stash_trainer.pairs.inputs import Annotation, SourceTrace, StepCredit
from support.steps import SUPPORT, build_steps


def support_trace(
    owner: str,
    trace_id: str,
    source: str = "src-1",
    request: str = "I want a refund for order 1182",
    annotations: Sequence[Annotation] = (),
    credits: dict[int, float] | None = None,
) -> ConsentedTrace:
    """The refund conversation of `owner` (its first request replaceable) with annotations and credits."""
    specs = [SUPPORT[0], ("user", request), *SUPPORT[2:]]
    steps = build_steps(trace_id, specs)
    scored = tuple(StepCredit(f"{trace_id}:{i}", c, None) for i, c in (credits or {}).items())
    return ConsentedTrace(owner, source, "openai", SourceTrace(trace_id, steps, tuple(annotations), scored))


def rating(trace_id: str, index: int, value: int, author: str, label_error: bool = False) -> Annotation:
    """A rating of step `index` by `author`."""
    return Annotation(f"{trace_id}-r{index}-{author}", f"{trace_id}:{index}", value, None, label_error, author)


def correction(trace_id: str, index: int, author: str, quote: str, label_error: bool = False) -> Annotation:
    """A comment on step `index` that quotes its text."""
    return Annotation(f"{trace_id}-c{index}", f"{trace_id}:{index}", None, "wrong order", label_error, author, quote)


class MemoryReader:
    """Answers the traces a scope covers from a fixed list, and records every scope it was asked for."""

    def __init__(self, traces: Sequence[ConsentedTrace]) -> None:
        self.traces = list(traces)
        self.asked: list[str] = []

    def consented_traces(self, scope: Scope) -> list[ConsentedTrace]:
        self.asked.append(scope.owner_id)
        return [t for t in self.traces if scope.covers(t.owner_id, t.source_id)]


def rated_trace(owner: str, trace_id: str, request: str, source: str = "src-1") -> ConsentedTrace:
    """A refund conversation whose repair (step 6) `owner` rated up and whose wrong answer (step 4) down."""
    ratings = [rating(trace_id, 6, 1, owner), rating(trace_id, 4, -1, owner)]
    return support_trace(owner, trace_id, source=source, request=request, annotations=ratings)


def group(trace: ConsentedTrace) -> str:
    """The trace's task group."""
    return task_group(trace.trace)


def admit_every_comparison(sessions: sessionmaker[Session], traces: Sequence[ConsentedTrace]) -> None:
    """Consent for every owner, collect, and have carol admit every comparison (one review suffices)."""
    with transaction(sessions) as session:
        for owner in sorted({trace.owner_id for trace in traces}):
            consent.grant(session, owner, owner, "v1", None, set())
        review.name_reviewer(session, "operator", "carol")
        review.set_agreeing_reviews(session, "operator", 1)
        collect(session, MemoryReader(traces), "operator")
    with transaction(sessions) as session:
        for item in review.queue(session, "carol", 100):
            verdict = "better" if review.a_is_chosen(item.comparison_id, "carol") else "worse"
            review.record_review(session, "carol", item.comparison_id, verdict, None)
