"""IngestClient: the labeler's `TraceSource` over ingest's gRPC API.

This is the edge between ingest's messages and the labeler's dataclasses: a `stash.rm.v1.Trace`
becomes a `LabelerTrace` here, and a failed call becomes the `stash_common.errors` type of its
status, so the evaluation worker and the servicer decide what a failure means without importing grpc.
"""

from __future__ import annotations

from stash.rm.v1 import common_pb2, ingest_pb2, ingest_pb2_grpc
from stash_common.channels import call_peer
from stash_common.messages import json_of
from stash_common.step_messages import step_from_proto
from stash_labeler.traces import LabelerTrace, RevisionPage, TraceRevision

# Seconds per call: reading one revision may carry thousands of steps; the other answers are small.
REVISION_TIMEOUT_S = 60
CALL_TIMEOUT_S = 30


class IngestClient:
    """Reads traces from ingest; every failure is raised as a `stash_common.errors` type."""

    def __init__(self, stub: ingest_pb2_grpc.IngestServiceStub) -> None:
        self.stub = stub

    def trace_revision(self, owner_id: str, trace_id: str, revision: int) -> LabelerTrace:
        """The trace as of `revision`; FailedPrecondition when a newer revision replaced it."""
        request = ingest_pb2.GetTraceRevisionRequest(owner_id=owner_id, trace_id=trace_id, revision=revision)
        response = call_peer("ingest", lambda: self.stub.GetTraceRevision(request, timeout=REVISION_TIMEOUT_S))
        return trace_from_proto(owner_id, response.trace)

    def current_revision(self, owner_id: str, trace_id: str) -> int:
        """The trace's newest revision; NotFound for a trace the owner does not have."""
        request = ingest_pb2.GetTraceRequest(owner_id=owner_id, trace_id=trace_id)
        return call_peer("ingest", lambda: self.stub.GetTrace(request, timeout=CALL_TIMEOUT_S)).trace.revision

    def changed_revisions(self, cursor: str, limit: int) -> RevisionPage:
        """The latest revisions of traces changed after `cursor`, across owners, oldest change first."""
        request = ingest_pb2.ListTraceRevisionsRequest(cursor=cursor, limit=limit)
        page = call_peer("ingest", lambda: self.stub.ListTraceRevisions(request, timeout=CALL_TIMEOUT_S))
        revisions = tuple(TraceRevision(item.owner_id, item.trace_id, item.revision) for item in page.revisions)
        return RevisionPage(revisions, page.next_cursor)


def trace_from_proto(owner_id: str, message: common_pb2.Trace) -> LabelerTrace:
    """A `stash.rm.v1.Trace` as a LabelerTrace."""
    return LabelerTrace(
        id=message.id,
        owner_id=owner_id,
        revision=message.revision,
        source_format=message.source_format,
        steps=tuple(step_from_proto(step) for step in message.steps),
        metadata=json_of(message.metadata),
        external_id=message.external_id if message.HasField("external_id") else None,
    )
