"""Assessor: cached section summaries and completion estimates, generated under a lease by the fast model.

The caller has already checked that the owner may read the trace (ingest answered with its steps)
and the ranges belong to it, so nothing here reads the cache or calls the model for a foreign
trace. Without a model every answer is `unavailable` with the setting to configure. Generation runs
in the request that took the lease; concurrent requests for the same evidence answer `pending`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import structlog
from sqlalchemy.orm import Session, sessionmaker

from stash_common.db import transaction
from stash_common.steps import TraceStep
from stash_labeler.assessments import completion, summaries
from stash_labeler.assessments.cache import FAILED, GENERATE, PENDING, READY, Claim, claim, finish
from stash_labeler.assessments.fast_model import MISSING_KEY, FastModel, ModelFailure
from stash_labeler.assessments.summaries import StepRange
from stash_labeler.store import SectionSummaryRow, TraceCompletionRow

log = structlog.get_logger()
SUMMARY_LEASE_S = 60.0
COMPLETION_LEASE_S = 90.0


@dataclass(frozen=True)
class Outcome:
    """One answer: a body when ready, else pending or unavailable with the reason."""

    body: dict[str, Any] | None = None
    pending: bool = False
    unavailable: bool = False
    reason: str = ""


class Assessor:
    """Reads and fills the assessment cache."""

    def __init__(self, sessions: sessionmaker[Session], model: FastModel | None) -> None:
        self.sessions = sessions
        self.model = model

    def summaries(
        self, owner_id: str, trace_id: str, steps: Sequence[TraceStep], requested: Sequence[tuple[str, str]]
    ) -> list[tuple[StepRange, Outcome]]:
        """One outcome per requested range, in request order; InvalidArgument for a range not in the trace."""
        ranges = summaries.ranges_of(steps, requested)
        if self.model is None:
            return [(step_range, Outcome(unavailable=True, reason=MISSING_KEY)) for step_range in ranges]
        with transaction(self.sessions) as session:
            claims = [
                claim(session, SectionSummaryRow, _key(owner_id, trace_id, r.key), SUMMARY_LEASE_S) for r in ranges
            ]
        outcomes = [_outcome(claimed) for claimed in claims]
        mine = [number for number, claimed in enumerate(claims) if claimed.state == GENERATE]
        if mine:
            generated = self._generate_summaries([ranges[n] for n in mine], [claims[n] for n in mine])
            for number, outcome in zip(mine, generated, strict=True):
                outcomes[number] = outcome
        return list(zip(ranges, outcomes, strict=True))

    def completion(self, owner_id: str, trace_id: str, steps: Sequence[TraceStep]) -> Outcome:
        """The trace's completion estimate, pending while another request generates it, or unavailable."""
        if self.model is None:
            return Outcome(unavailable=True, reason=MISSING_KEY)
        evidence = completion.completion_evidence(steps)
        if not evidence.tasks:
            return Outcome(body={"tasks": []})
        key = {"source_hash": evidence.source_hash, "version": completion.VERSION}
        with transaction(self.sessions) as session:
            claimed = claim(session, TraceCompletionRow, _key(owner_id, trace_id, key), COMPLETION_LEASE_S)
        if claimed.state != GENERATE:
            return _outcome(claimed)
        prompt, schema = completion.prompt_and_schema(evidence)
        try:
            body = {"tasks": completion.parse_answer(self._answer(prompt, completion.TOOL, schema), evidence)}
        except ModelFailure as failure:
            return self._fail(TraceCompletionRow, claimed, str(failure), COMPLETION_LEASE_S)
        with transaction(self.sessions) as session:
            finish(session, TraceCompletionRow, claimed, body=body)
        return Outcome(body=body)

    def _generate_summaries(self, ranges: list[StepRange], claims: list[Claim]) -> list[Outcome]:
        prompt, schema = summaries.prompt_and_schema(ranges)
        try:
            bodies = summaries.parse_answer(self._answer(prompt, summaries.TOOL, schema), ranges)
        except ModelFailure as failure:
            return [self._fail(SectionSummaryRow, claimed, str(failure), SUMMARY_LEASE_S) for claimed in claims]
        with transaction(self.sessions) as session:
            for claimed, body in zip(claims, bodies, strict=True):
                finish(session, SectionSummaryRow, claimed, body=body)
        return [Outcome(body=body) for body in bodies]

    def _answer(self, prompt: str, tool: str, schema: dict[str, Any]) -> dict[str, Any]:
        assert self.model is not None
        return self.model.answer(prompt, tool, schema)

    def _fail(self, table: Any, claimed: Claim, reason: str, retry_after_s: float) -> Outcome:
        log.warning("assessment generation failed", table=table.__tablename__, reason=reason)
        with transaction(self.sessions) as session:
            finish(session, table, claimed, error=reason, retry_after_s=retry_after_s)
        return Outcome(unavailable=True, reason=reason)


def _key(owner_id: str, trace_id: str, key: dict[str, Any]) -> dict[str, Any]:
    return {"owner_id": owner_id, "trace_id": trace_id, **key}


def _outcome(claimed: Claim) -> Outcome:
    if claimed.state == READY:
        return Outcome(body=claimed.body)
    if claimed.state == FAILED:
        return Outcome(unavailable=True, reason=claimed.error or "generation failed")
    assert claimed.state in (PENDING, GENERATE)
    return Outcome(pending=True)
