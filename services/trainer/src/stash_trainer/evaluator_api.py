"""EvaluatorServicer: proto ⇄ domain for the shared evaluator's data (`stash_trainer.evaluator`).

Every call is one transaction: a refused call leaves nothing behind. Owner and actor ids come from the
gateway, which authenticates accounts and the operator's admin key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import grpc
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from stash.rm.v1 import evaluator_pb2, evaluator_pb2_grpc
from stash_common.db import transaction
from stash_common.errors import InvalidArgument
from stash_common.messages import json_of, struct_of, timestamp_of
from stash_common.requests import owner_of
from stash_common.storage import ObjectStore
from stash_trainer.dispatcher import Dispatcher
from stash_trainer.evaluator import benchmarks, consent, releases, review
from stash_trainer.evaluator.collection import ConsentedReader, collect
from stash_trainer.evaluator.store import (
    BenchmarkRow,
    CandidateRow,
    ComparisonRow,
    ConsentRow,
    OperatorActionRow,
    ReleaseRow,
)
from stash_trainer.store import RewardModelRow

MAX_QUEUE = 50
MAX_ACTIONS = 1000


class EvaluatorReader(ConsentedReader, Protocol):
    """What the servicer reads from ingest: consented traces, and which sources an account owns."""

    def owned_sources(self, owner_id: str) -> set[str]:
        """The ids of the sources the owner owns."""
        ...


@dataclass(frozen=True)
class CandidateTraining:
    """What starting a candidate needs: the dispatcher to wake, the defaults of a model, and who publishes."""

    dispatcher: Dispatcher
    default_base_model: str
    compute: str
    published: Callable[[], object]  # a release or rollback was recorded: publish it to the scorer


class EvaluatorServicer(evaluator_pb2_grpc.EvaluatorServiceServicer):
    """Consent, the corpus, its review, benchmarks and snapshots, over gRPC."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        traces: EvaluatorReader,
        objects: ObjectStore,
        training: CandidateTraining,
    ) -> None:
        self.sessions = sessions
        self.traces = traces
        self.objects = objects
        self.training = training

    def start_candidate(self, actor_id: str) -> evaluator_pb2.Candidate:
        """Queue a candidate from a new corpus snapshot and wake the dispatchers."""
        with transaction(self.sessions) as session:
            row = releases.start_candidate(
                session, self.objects, actor_id, self.training.default_base_model, self.training.compute
            )
            message = candidate_to_proto(row, session.get(RewardModelRow, row.id))
        self.training.dispatcher.wake()
        return message

    def start_scheduled(self) -> str | None:
        """Queue the candidate the schedule says is due, if any (one replica wins), and wake the dispatchers."""
        training = self.training
        with transaction(self.sessions) as session:
            row = releases.start_scheduled(session, self.objects, training.default_base_model, training.compute)
            started = row.id if row is not None else None
        if started is not None:
            training.dispatcher.wake()
        return started

    def GrantConsent(
        self, request: evaluator_pb2.GrantConsentRequest, context: grpc.ServicerContext
    ) -> evaluator_pb2.GrantConsentResponse:
        """Open a consent; chosen sources must be the owner's."""
        owner_id = owner_of(request)
        if request.all_sources and request.source_ids:
            raise InvalidArgument("source_ids", "give either all_sources or source_ids, not both")
        chosen = None if request.all_sources else list(request.source_ids)
        owned = self.traces.owned_sources(owner_id) if chosen else set()
        with transaction(self.sessions) as session:
            row = consent.grant(session, owner_id, _actor(request.actor_id), request.text_version, chosen, owned)
            return evaluator_pb2.GrantConsentResponse(consent=consent_to_proto(row))

    def RevokeConsent(
        self, request: evaluator_pb2.RevokeConsentRequest, context: grpc.ServicerContext
    ) -> evaluator_pb2.RevokeConsentResponse:
        """Close the owner's open consent."""
        with transaction(self.sessions) as session:
            row = consent.revoke(session, owner_of(request), _actor(request.actor_id))
            return evaluator_pb2.RevokeConsentResponse(consent=consent_to_proto(row))

    def GetConsent(
        self, request: evaluator_pb2.GetConsentRequest, context: grpc.ServicerContext
    ) -> evaluator_pb2.GetConsentResponse:
        """The owner's consents, contribution and when it stopped."""
        owner_id = owner_of(request)
        with transaction(self.sessions) as session:
            count = select(func.count()).select_from(ComparisonRow).where(ComparisonRow.owner_id == owner_id)
            return evaluator_pb2.GetConsentResponse(
                consents=[consent_to_proto(row) for row in consent.history(session, owner_id)],
                contributed_comparisons=session.scalar(count) or 0,
                stopped_at=timestamp_of(consent.stopped_at(session, owner_id)),
            )

    def ListReviewQueue(
        self, request: evaluator_pb2.ListReviewQueueRequest, context: grpc.ServicerContext
    ) -> evaluator_pb2.ListReviewQueueResponse:
        """The reviewer's next comparisons."""
        if not 1 <= request.limit <= MAX_QUEUE:
            raise InvalidArgument("limit", f"must be 1..{MAX_QUEUE}")
        with transaction(self.sessions) as session:
            items = review.queue(session, _actor(request.reviewer_id, "reviewer_id"), request.limit)
        return evaluator_pb2.ListReviewQueueResponse(
            items=[
                evaluator_pb2.ReviewItem(
                    comparison_id=item.comparison_id,
                    context_a=item.context_a,
                    action_a=item.action_a,
                    context_b=item.context_b,
                    action_b=item.action_b,
                )
                for item in items
            ]
        )

    def RecordReview(
        self, request: evaluator_pb2.RecordReviewRequest, context: grpc.ServicerContext
    ) -> evaluator_pb2.RecordReviewResponse:
        """Record a verdict."""
        note = request.note if request.HasField("note") else None
        reviewer = _actor(request.reviewer_id, "reviewer_id")
        with transaction(self.sessions) as session:
            row = review.record_review(session, reviewer, request.comparison_id, request.verdict, note)
            return evaluator_pb2.RecordReviewResponse(review_id=row.id)

    def NameReviewer(
        self, request: evaluator_pb2.NameReviewerRequest, context: grpc.ServicerContext
    ) -> evaluator_pb2.NameReviewerResponse:
        """Name an evaluator reviewer."""
        with transaction(self.sessions) as session:
            row = review.name_reviewer(session, _actor(request.actor_id), request.user_id)
            return evaluator_pb2.NameReviewerResponse(user_id=row.user_id)

    def RemoveReviewer(
        self, request: evaluator_pb2.RemoveReviewerRequest, context: grpc.ServicerContext
    ) -> evaluator_pb2.RemoveReviewerResponse:
        """Stop a reviewer reviewing."""
        with transaction(self.sessions) as session:
            review.remove_reviewer(session, _actor(request.actor_id), request.user_id)
        return evaluator_pb2.RemoveReviewerResponse()

    def SetReviewPolicy(
        self, request: evaluator_pb2.SetReviewPolicyRequest, context: grpc.ServicerContext
    ) -> evaluator_pb2.SetReviewPolicyResponse:
        """Set how many agreeing reviews admit a comparison."""
        with transaction(self.sessions) as session:
            review.set_agreeing_reviews(session, _actor(request.actor_id), request.agreeing_reviews)
        return evaluator_pb2.SetReviewPolicyResponse(agreeing_reviews=request.agreeing_reviews)

    def GetEvaluatorStats(
        self, request: evaluator_pb2.GetEvaluatorStatsRequest, context: grpc.ServicerContext
    ) -> evaluator_pb2.GetEvaluatorStatsResponse:
        """Corpus and review statistics."""
        with transaction(self.sessions) as session:
            response = evaluator_pb2.GetEvaluatorStatsResponse(
                stats=struct_of(review.stats(session)),
                reviewer_ids=[row.user_id for row in review.reviewers(session)],
            )
            response.disagreements.extend([struct_of(item) for item in review.disagreements(session)])
            return response

    def CollectCorpus(
        self, request: evaluator_pb2.CollectCorpusRequest, context: grpc.ServicerContext
    ) -> evaluator_pb2.CollectCorpusResponse:
        """Build candidates from every consented account."""
        with transaction(self.sessions) as session:
            return evaluator_pb2.CollectCorpusResponse(added=collect(session, self.traces, _actor(request.actor_id)))

    def FreezeBenchmark(
        self, request: evaluator_pb2.FreezeBenchmarkRequest, context: grpc.ServicerContext
    ) -> evaluator_pb2.FreezeBenchmarkResponse:
        """Freeze a benchmark version."""
        with transaction(self.sessions) as session:
            row = benchmarks.freeze(session, _actor(request.actor_id), request.name, list(request.task_groups))
            return evaluator_pb2.FreezeBenchmarkResponse(benchmark=benchmark_to_proto(row))

    def ListBenchmarks(
        self, request: evaluator_pb2.ListBenchmarksRequest, context: grpc.ServicerContext
    ) -> evaluator_pb2.ListBenchmarksResponse:
        """Every benchmark version."""
        with transaction(self.sessions) as session:
            rows = benchmarks.benchmarks(session)
            return evaluator_pb2.ListBenchmarksResponse(benchmarks=[benchmark_to_proto(row) for row in rows])

    def TakeSnapshot(
        self, request: evaluator_pb2.TakeSnapshotRequest, context: grpc.ServicerContext
    ) -> evaluator_pb2.TakeSnapshotResponse:
        """Store the training corpus."""
        with transaction(self.sessions) as session:
            row = benchmarks.take_snapshot(session, self.objects, _actor(request.actor_id))
            return evaluator_pb2.TakeSnapshotResponse(
                id=row.id,
                object_key=row.object_key,
                content_hash=row.content_hash,
                size=row.size,
                held_out=row.held_out,
            )

    def ListOperatorActions(
        self, request: evaluator_pb2.ListOperatorActionsRequest, context: grpc.ServicerContext
    ) -> evaluator_pb2.ListOperatorActionsResponse:
        """What operators did, newest first."""
        if not 1 <= request.limit <= MAX_ACTIONS:
            raise InvalidArgument("limit", f"must be 1..{MAX_ACTIONS}")
        query = select(OperatorActionRow).order_by(OperatorActionRow.at.desc()).limit(request.limit)
        with transaction(self.sessions) as session:
            return evaluator_pb2.ListOperatorActionsResponse(
                actions=[
                    evaluator_pb2.OperatorAction(
                        actor_id=row.actor_id,
                        action=row.action,
                        details=struct_of(row.details),
                        at=timestamp_of(row.at),
                    )
                    for row in session.scalars(query)
                ]
            )

    def SetTrainingPolicy(
        self, request: evaluator_pb2.SetTrainingPolicyRequest, context: grpc.ServicerContext
    ) -> evaluator_pb2.SetTrainingPolicyResponse:
        """Replace the training policy."""
        with transaction(self.sessions) as session:
            releases.set_policy(session, _actor(request.actor_id), json_of(request.policy) or {})
            return evaluator_pb2.SetTrainingPolicyResponse(policy=_policy_message(session))

    def GetTrainingPolicy(
        self, request: evaluator_pb2.GetTrainingPolicyRequest, context: grpc.ServicerContext
    ) -> evaluator_pb2.GetTrainingPolicyResponse:
        """The training policy in force."""
        with transaction(self.sessions) as session:
            return evaluator_pb2.GetTrainingPolicyResponse(policy=_policy_message(session))

    def TrainCandidate(
        self, request: evaluator_pb2.TrainCandidateRequest, context: grpc.ServicerContext
    ) -> evaluator_pb2.TrainCandidateResponse:
        """Queue a candidate now."""
        return evaluator_pb2.TrainCandidateResponse(candidate=self.start_candidate(_actor(request.actor_id)))

    def ListCandidates(
        self, request: evaluator_pb2.ListCandidatesRequest, context: grpc.ServicerContext
    ) -> evaluator_pb2.ListCandidatesResponse:
        """Every candidate, newest first."""
        with transaction(self.sessions) as session:
            found = releases.candidates(session)
            return evaluator_pb2.ListCandidatesResponse(
                candidates=[candidate_to_proto(row, model) for row, model in found]
            )

    def ApproveCandidate(
        self, request: evaluator_pb2.ApproveCandidateRequest, context: grpc.ServicerContext
    ) -> evaluator_pb2.ApproveCandidateResponse:
        """Release a candidate awaiting approval."""
        with transaction(self.sessions) as session:
            row = releases.approve(session, _actor(request.actor_id), request.candidate_id)
            session.flush()
            message = release_to_proto(session, row)
        self.training.published()
        return evaluator_pb2.ApproveCandidateResponse(release=message)

    def RollbackRelease(
        self, request: evaluator_pb2.RollbackReleaseRequest, context: grpc.ServicerContext
    ) -> evaluator_pb2.RollbackReleaseResponse:
        """Make an earlier release current again."""
        with transaction(self.sessions) as session:
            row = releases.rollback(session, _actor(request.actor_id), request.number)
            session.flush()
            message = release_to_proto(session, row)
        self.training.published()
        return evaluator_pb2.RollbackReleaseResponse(release=message)

    def ListReleases(
        self, request: evaluator_pb2.ListReleasesRequest, context: grpc.ServicerContext
    ) -> evaluator_pb2.ListReleasesResponse:
        """Every release, newest first, and the current one."""
        with transaction(self.sessions) as session:
            return evaluator_pb2.ListReleasesResponse(
                releases=[release_to_proto(session, row) for row in releases.releases(session)],
                current=releases.current_number(session),
            )


def candidate_to_proto(row: CandidateRow, model: RewardModelRow | None) -> evaluator_pb2.Candidate:
    """A candidate with its training model's state as a message."""
    message = evaluator_pb2.Candidate(
        id=row.id,
        status=releases.status_of(row, model),
        snapshot_id=row.snapshot_id,
        policy=struct_of(row.policy),
        gate=struct_of(row.gate),
        reason=row.reason or (model.error if model is not None and model.error else ""),
        created_by=row.created_by,
        created_at=timestamp_of(row.created_at),
        job_key=f"jobs/trainer/{model.job_id}" if model is not None and model.job_id else "",
        num_pairs=(model.num_pairs or 0) if model is not None else 0,
    )
    message.benchmarks.extend([struct_of(entry) for entry in row.benchmarks])
    message.report.extend([struct_of(entry) for entry in row.report or []])
    return message


def release_to_proto(session: Session, row: ReleaseRow) -> evaluator_pb2.Release:
    """A release with its candidate's report, whether it is current and whether the scorer acknowledged it."""
    candidate = session.get(CandidateRow, row.candidate_id)
    message = evaluator_pb2.Release(
        number=row.number,
        candidate_id=row.candidate_id,
        job_key=row.job_key,
        released_by=row.released_by,
        released_at=timestamp_of(row.released_at),
        notes=row.notes,
        current=releases.current_number(session) == row.number,
        published=releases.acknowledged(session, row.number),
    )
    message.report.extend([struct_of(entry) for entry in (candidate.report if candidate is not None else None) or []])
    return message


def _policy_message(session: Session) -> evaluator_pb2.TrainingPolicy:
    policy, row = releases.policy_of(session)
    return evaluator_pb2.TrainingPolicy(
        policy=struct_of(policy.model_dump()),
        set_by=row.set_by if row is not None else "",
        set_at=timestamp_of(row.set_at if row is not None else None),
    )


def consent_to_proto(row: ConsentRow) -> evaluator_pb2.Consent:
    """A consent row as a message."""
    return evaluator_pb2.Consent(
        id=row.id,
        all_sources=row.source_ids is None,
        source_ids=row.source_ids or [],
        text_version=row.text_version,
        granted_by=row.granted_by,
        granted_at=timestamp_of(row.granted_at),
        revoked_by=row.revoked_by or "",
        revoked_at=timestamp_of(row.revoked_at),
    )


def benchmark_to_proto(row: BenchmarkRow) -> evaluator_pb2.Benchmark:
    """A benchmark version as a message."""
    return evaluator_pb2.Benchmark(
        id=row.id,
        name=row.name,
        version=row.version,
        content_hash=row.content_hash,
        task_groups=row.task_groups,
        size=row.size,
        slices=struct_of(row.slices),
        frozen_by=row.frozen_by,
        frozen_at=timestamp_of(row.frozen_at),
        trace_count=len(row.trace_ids),
    )


def _actor(actor_id: str, field: str = "actor_id") -> str:
    if not actor_id:
        raise InvalidArgument(field, "is required: who does this is recorded")
    return actor_id
