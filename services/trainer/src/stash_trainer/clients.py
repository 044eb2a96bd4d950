"""The trainer's clients of ingest, the labeler and the scorer: their messages meet the trainer's dataclasses here.

Pair building and the job policy see only `SourceTrace`, `Annotation` and `StepCredit`
(`pairs/inputs.py`) and `PublishedScores` (`dispatcher.py`), never a `stash.rm.v1` message or a gRPC error:
this module is the edge where one becomes the other. A failed read becomes `Unavailable` naming the
peer's status, so the dispatcher can record it as the model's error and the servicer can answer with
it. A failed publication becomes the `stash_common.errors` type of its status (`Unavailable` when the
scorer is out of reach), so the dispatcher can tell an outage from a refusal in its log.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime

import grpc

from stash.rm.v1 import (
    common_pb2,
    ingest_pb2,
    ingest_pb2_grpc,
    labeler_pb2,
    labeler_pb2_grpc,
    scorer_pb2,
    scorer_pb2_grpc,
)
from stash_common.channels import peer_error
from stash_common.errors import InvalidArgument, NotFound, Unavailable
from stash_common.messages import timestamp_of
from stash_common.step_messages import step_from_proto
from stash_common.steps import TraceStep
from stash_trainer.dispatcher import PublishedScores
from stash_trainer.evaluator.consent import Scope
from stash_trainer.evaluator.corpus import ConsentedTrace
from stash_trainer.pairs.inputs import Annotation, SourceTrace, StepCredit

LIST_TIMEOUT_S = 30
READ_TIMEOUT_S = 60
PUBLISH_TIMEOUT_S = 60
LIST_PAGE_LIMIT = 500


class TraceClient:
    """Reads an owner's traces from ingest, with their latest succeeded evaluations from the labeler."""

    def __init__(self, ingest: ingest_pb2_grpc.IngestServiceStub, labeler: labeler_pb2_grpc.LabelerServiceStub) -> None:
        self.ingest = ingest
        self.labeler = labeler

    def source_trace(self, owner_id: str, trace_id: str) -> SourceTrace:
        """One selected trace with its annotations and step credits."""
        with _reading("the selected traces"):
            found = self.ingest.GetTrace(
                ingest_pb2.GetTraceRequest(owner_id=owner_id, trace_id=trace_id), timeout=READ_TIMEOUT_S
            )
            request = labeler_pb2.GetTraceEvaluationRequest(owner_id=owner_id, trace_id=trace_id, succeeded_only=True)
            evaluated = self.labeler.GetTraceEvaluation(request, timeout=READ_TIMEOUT_S)
        evaluation = evaluated.evaluation if evaluated.HasField("evaluation") else None
        return trace_from_proto(found.trace, found.annotations, evaluation)

    def first_unowned(self, owner_id: str, trace_ids: list[str]) -> str | None:
        """The first of `trace_ids` the owner has no trace with, or None when the owner has them all."""
        request = ingest_pb2.ListTracesRequest(
            owner_id=owner_id,
            trace_ids=trace_ids,
            page=common_pb2.PageRequest(limit=min(len(trace_ids), LIST_PAGE_LIMIT)),
        )
        owned: set[str] = set()
        with _reading("the selected traces"):
            while True:
                page = self.ingest.ListTraces(request, timeout=LIST_TIMEOUT_S)
                owned |= {summary.id for summary in page.traces}
                request.page.offset += len(page.traces)
                if not page.traces or request.page.offset >= page.page_info.total:
                    break
        return next((trace_id for trace_id in trace_ids if trace_id not in owned), None)

    def consented_traces(self, scope: Scope) -> list[ConsentedTrace]:
        """The traces of `scope.owner_id` that the scope covers, asked for only by that owner and source."""
        sources = [None] if scope.source_ids is None else sorted(scope.source_ids)
        summaries = [summary for source_id in sources for summary in self._summaries(scope.owner_id, source_id)]
        return [
            ConsentedTrace(
                scope.owner_id,
                summary.source_id,
                summary.source_format,
                self.source_trace(scope.owner_id, summary.id),
            )
            for summary in summaries
            if summary.source_owner_id == scope.owner_id and scope.covers(scope.owner_id, summary.source_id)
        ]

    def owned_sources(self, owner_id: str) -> set[str]:
        """The ids of the sources the owner owns (not those shared with it)."""
        with _reading("the account's sources"):
            listed = self.ingest.ListTraceSources(
                ingest_pb2.ListTraceSourcesRequest(owner_id=owner_id), timeout=READ_TIMEOUT_S
            )
        return {source.source_id for source in listed.sources if source.owner_id == owner_id}

    def _summaries(self, owner_id: str, source_id: str | None) -> list[common_pb2.TraceSummary]:
        request = ingest_pb2.ListTracesRequest(owner_id=owner_id, page=common_pb2.PageRequest(limit=LIST_PAGE_LIMIT))
        if source_id is not None:
            request.source_id = source_id
        summaries: list[common_pb2.TraceSummary] = []
        with _reading("the consented traces"):
            while True:
                page = self.ingest.ListTraces(request, timeout=LIST_TIMEOUT_S)
                summaries.extend(page.traces)
                request.page.offset += len(page.traces)
                if not page.traces or request.page.offset >= page.page_info.total:
                    return summaries


class ScoreClient:
    """Tells the scorer where a succeeded training job's scores are, when a model is deleted, and each release."""

    def __init__(self, scorer: scorer_pb2_grpc.ScorerServiceStub) -> None:
        self.scorer = scorer

    def publish_training_scores(self, owner_id: str, reward_model_id: str, job_key: str) -> PublishedScores:
        """Have the scorer publish the scores stored under the training job's key (the model is ready then)."""
        request = scorer_pb2.PublishTrainingScoresRequest(
            owner_id=owner_id, reward_model_id=reward_model_id, job_key=job_key
        )
        try:
            response = self.scorer.PublishTrainingScores(request, timeout=PUBLISH_TIMEOUT_S)
        except grpc.RpcError as error:
            raise peer_error("the scorer", error) from error
        return PublishedScores(published=response.published_traces, rejected=response.rejected_traces)

    def publish_release(self, number: int, job_key: str, released_at: datetime) -> None:
        """Tell the scorer a shared evaluator release took effect; `Unavailable` while it is out of reach."""
        request = scorer_pb2.PublishEvaluatorReleaseRequest(
            number=number, job_key=job_key, released_at=timestamp_of(released_at)
        )
        try:
            self.scorer.PublishEvaluatorRelease(request, timeout=PUBLISH_TIMEOUT_S)
        except grpc.RpcError as error:
            raise peer_error("the scorer", error) from error

    def forget_reward_model(self, owner_id: str, reward_model_id: str) -> None:
        """Have the scorer drop the model's scores and runs; `Unavailable` while it is out of reach."""
        request = scorer_pb2.ForgetRewardModelRequest(owner_id=owner_id, reward_model_id=reward_model_id)
        try:
            self.scorer.ForgetRewardModel(request, timeout=PUBLISH_TIMEOUT_S)
        except grpc.RpcError as error:
            raise peer_error("the scorer", error) from error


@contextmanager
def _reading(what: str) -> Iterator[None]:
    # A peer's failure is the trainer's dependency being unavailable, except a trace it does not find: that one is
    # gone (deleted since it was selected), and reading it again would not find it either, so a model failed by it
    # is not offered a retry. Its status stays in the message.
    try:
        yield
    except grpc.RpcError as error:
        message = f"could not read {what}: {error.code().name}: {error.details()}"
        if error.code() == grpc.StatusCode.NOT_FOUND:
            raise NotFound(message) from error
        raise Unavailable(message) from error


def annotation_from_proto(message: common_pb2.Annotation) -> Annotation:
    """A `stash.rm.v1.Annotation` as an Annotation."""
    return Annotation(
        id=message.id,
        step_id=message.step_id if message.HasField("step_id") else None,
        rating=message.rating if message.HasField("rating") else None,
        comment=message.comment if message.HasField("comment") else None,
        label_error=message.label_error,
        author_id=message.author_id,
        quote=message.quote.text if message.HasField("quote") else None,
        author_name=message.author_name,
    )


def credit_from_proto(message: labeler_pb2.StepEvaluation) -> StepCredit:
    """A step's credit; an expected credit that is missing, not finite or outside -1..+1 leaves the step unscored."""
    expected = message.expected_credit if message.HasField("expected_credit") else None
    if expected is not None and not (math.isfinite(expected) and -1.0 <= expected <= 1.0):
        expected = None
    ordinal = message.ordinal_credit if message.HasField("ordinal_credit") else None
    return StepCredit(step_id=message.step_id, expected_credit=expected, ordinal_credit=ordinal)


def trace_from_proto(
    trace: common_pb2.Trace,
    annotations: Iterable[common_pb2.Annotation],
    evaluation: labeler_pb2.TraceEvaluation | None,
) -> SourceTrace:
    """A trace, its annotations and its labeler evaluation as a SourceTrace.

    Only a succeeded evaluation supplies credit; without one every step is unscored. Credits of
    steps the trace no longer has are dropped (step ids are immutable, so the others still apply).
    """
    steps = tuple(step_from_proto(step) for step in trace.steps)
    own = []
    for annotation in annotations:
        if annotation.trace_id != trace.id:
            raise InvalidArgument(
                "annotations", f"annotation {annotation.id} belongs to trace {annotation.trace_id}, not {trace.id}"
            )
        own.append(annotation_from_proto(annotation))
    return SourceTrace(
        id=trace.id,
        steps=steps,
        annotations=tuple(own),
        credits=_credits(steps, evaluation),
        revision=trace.revision,
    )


def _credits(steps: tuple[TraceStep, ...], evaluation: labeler_pb2.TraceEvaluation | None) -> tuple[StepCredit, ...]:
    if evaluation is None or evaluation.status != common_pb2.JOB_STATUS_SUCCEEDED:
        return ()
    known = {step.id for step in steps}
    return tuple(credit_from_proto(step) for step in evaluation.steps if step.step_id in known)
