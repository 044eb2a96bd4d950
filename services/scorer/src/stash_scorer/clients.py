"""The scorer's clients of ingest and the trainer: their messages become the scorer's own dataclasses here.

`IngestClient` is the scorer's `TraceSource` and `TrainerClient` its `ModelSource` (`stash_scorer.inputs`).
This module is the edge: a `stash.rm.v1` message becomes a `ScorerTrace`, `TraceRevision` or
`RewardModel`, and a failed call becomes the `stash_common.errors` type of its status, so requests,
publishing, the dispatcher and the background sweep decide what a failure means without importing grpc.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stash.rm.v1 import common_pb2, ingest_pb2, ingest_pb2_grpc, trainer_pb2, trainer_pb2_grpc
from stash_common.channels import call_peer
from stash_common.messages import json_of
from stash_common.step_messages import step_from_proto
from stash_scorer.inputs import RevisionPage, RewardModel, ScorerTrace, TraceRevision

# Seconds per call: a trace may carry thousands of steps; the other answers are small.
TRACE_TIMEOUT_S = 60
CALL_TIMEOUT_S = 30
LIST_PAGE_LIMIT = 500


class IngestClient:
    """Reads traces and their changes from ingest; every failure is raised as a `stash_common.errors` type."""

    def __init__(self, stub: ingest_pb2_grpc.IngestServiceStub) -> None:
        self.stub = stub

    def current_trace(self, owner_id: str, trace_id: str) -> ScorerTrace:
        """The trace at its newest revision; NotFound for a trace the owner does not have."""
        request = ingest_pb2.GetTraceRequest(owner_id=owner_id, trace_id=trace_id)
        return trace_from_proto(
            owner_id, call_peer("ingest", lambda: self.stub.GetTrace(request, timeout=TRACE_TIMEOUT_S)).trace
        )

    def trace_revision(self, owner_id: str, trace_id: str, revision: int) -> ScorerTrace:
        """The trace as of `revision`; FailedPrecondition when a newer revision replaced it."""
        request = ingest_pb2.GetTraceRevisionRequest(owner_id=owner_id, trace_id=trace_id, revision=revision)
        response = call_peer("ingest", lambda: self.stub.GetTraceRevision(request, timeout=TRACE_TIMEOUT_S))
        return trace_from_proto(owner_id, response.trace)

    def changed_revisions(
        self, cursor: str, limit: int, owner_id: str | None = None, include_unsettled: bool = False
    ) -> RevisionPage:
        """The newest revisions of traces changed after `cursor` (one owner's, or all), oldest change first."""
        request = ingest_pb2.ListTraceRevisionsRequest(cursor=cursor, limit=limit, include_unsettled=include_unsettled)
        if owner_id is not None:
            request.owner_id = owner_id
        page = call_peer("ingest", lambda: self.stub.ListTraceRevisions(request, timeout=CALL_TIMEOUT_S))
        revisions = tuple(
            TraceRevision(item.owner_id, item.trace_id, item.revision, item.updated_at.ToDatetime())
            for item in page.revisions
        )
        return RevisionPage(revisions, page.next_cursor)

    def existing(self, owner_id: str, trace_ids: Sequence[str]) -> set[str]:
        """Those of `trace_ids` the owner still has."""
        if not trace_ids:
            return set()  # an empty filter would list every trace
        request = ingest_pb2.ListTracesRequest(
            owner_id=owner_id,
            trace_ids=list(trace_ids),
            page=common_pb2.PageRequest(limit=max(1, min(len(trace_ids), LIST_PAGE_LIMIT))),
        )
        found: set[str] = set()
        while True:
            page = call_peer("ingest", lambda: self.stub.ListTraces(request, timeout=CALL_TIMEOUT_S))
            found |= {summary.id for summary in page.traces}
            request.page.offset += len(page.traces)
            if not page.traces or request.page.offset >= page.page_info.total:
                return found


class TrainerClient:
    """Reads reward models from the trainer; every failure is raised as a `stash_common.errors` type."""

    def __init__(self, stub: trainer_pb2_grpc.TrainerServiceStub) -> None:
        self.stub = stub

    def reward_model(self, owner_id: str, model_id: str) -> RewardModel:
        """The owner's model; NotFound for another owner's."""
        request = trainer_pb2.GetRewardModelRequest(owner_id=owner_id, reward_model_id=model_id)
        response = call_peer("the trainer", lambda: self.stub.GetRewardModel(request, timeout=CALL_TIMEOUT_S))
        return model_from_proto(owner_id, response.reward_model.reward_model)


def trace_from_proto(owner_id: str, message: common_pb2.Trace) -> ScorerTrace:
    """A `stash.rm.v1.Trace` as a ScorerTrace."""
    steps = tuple(step_from_proto(step) for step in message.steps)
    return ScorerTrace(id=message.id, owner_id=owner_id, revision=message.revision, steps=steps)


def model_from_proto(owner_id: str, message: trainer_pb2.RewardModel) -> RewardModel:
    """A `stash.rm.v1.RewardModel` as a RewardModel, its status by the enum name (JOB_STATUS_SUCCEEDED: succeeded)."""
    metrics: dict[str, Any] = json_of(message.metrics) if message.HasField("metrics") else {}
    version = metrics.get("action_scoring_version")
    return RewardModel(
        id=message.id,
        owner_id=owner_id,
        name=message.name,
        status=common_pb2.JobStatus.Name(message.status).removeprefix("JOB_STATUS_").lower(),
        artifact_key=message.artifact_key if message.HasField("artifact_key") else None,
        action_scoring_version=version if isinstance(version, int) else None,
    )
