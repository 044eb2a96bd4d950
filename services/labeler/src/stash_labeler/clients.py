"""IngestClient: the labeler's `TraceSource` over ingest's gRPC API.

This is the edge between ingest's messages and the labeler's dataclasses: a `stash.rm.v1.Trace`
becomes a `LabelerTrace` here, and a failed call becomes the `stash_common.errors` type of its
status, so the evaluation worker and the servicer decide what a failure means without importing grpc.
"""

from __future__ import annotations

from collections.abc import Sequence

from stash.rm.v1 import common_pb2, ingest_pb2, ingest_pb2_grpc
from stash_common.channels import call_peer
from stash_common.errors import FailedPrecondition, NotFound, StashError
from stash_common.messages import json_of
from stash_common.step_messages import step_from_proto
from stash_labeler.traces import LabelerTrace, RevisionPage, RevisionRead, TraceRevision

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

    def trace_revisions(self, wanted: Sequence[TraceRevision]) -> list[RevisionRead]:
        """Each wanted revision's trace, or the error saying why there is none, in order: one call per owner.

        Raises Unavailable when ingest could not be reached.
        """
        read: dict[int, RevisionRead] = {}
        for owner_id, positions in _by_owner(wanted).items():
            results = self._read_owner_revisions(owner_id, [wanted[at] for at in positions])
            for at, result in zip(positions, results, strict=True):
                read[at] = _revision_read(owner_id, wanted[at], result)
        return [read[at] for at in range(len(wanted))]

    def _read_owner_revisions(
        self, owner_id: str, wanted: Sequence[TraceRevision]
    ) -> Sequence[ingest_pb2.TraceRevisionResult]:
        request = ingest_pb2.BatchGetTraceRevisionsRequest(
            owner_id=owner_id,
            wanted=[ingest_pb2.WantedRevision(trace_id=item.trace_id, revision=item.revision) for item in wanted],
        )
        answer = call_peer("ingest", lambda: self.stub.BatchGetTraceRevisions(request, timeout=REVISION_TIMEOUT_S))
        return answer.results

    def current_revision(self, owner_id: str, trace_id: str) -> int:
        """The trace's newest revision; NotFound for a trace the owner does not have. Asked of the owner's own
        list, not GetTrace: GetTrace also answers a reviewer, who must not relabel the trace they read."""
        request = ingest_pb2.ListTracesRequest(
            owner_id=owner_id, trace_ids=[trace_id], page=common_pb2.PageRequest(limit=1)
        )
        found = call_peer("ingest", lambda: self.stub.ListTraces(request, timeout=CALL_TIMEOUT_S)).traces
        if not found:
            raise NotFound(f"trace {trace_id} not found")
        return found[0].revision

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


def _by_owner(wanted: Sequence[TraceRevision]) -> dict[str, list[int]]:
    """The positions of each owner's wanted revisions."""
    positions: dict[str, list[int]] = {}
    for at, revision in enumerate(wanted):
        positions.setdefault(revision.owner_id, []).append(at)
    return positions


def _revision_read(owner_id: str, wanted: TraceRevision, result: ingest_pb2.TraceRevisionResult) -> RevisionRead:
    if result.state == ingest_pb2.REVISION_STATE_FOUND:
        return trace_from_proto(owner_id, result.trace)
    if result.state == ingest_pb2.REVISION_STATE_NOT_FOUND:
        return NotFound(f"trace {wanted.trace_id}: {result.error_message}")
    if result.state == ingest_pb2.REVISION_STATE_SUPERSEDED:
        return FailedPrecondition(f"trace {wanted.trace_id}: {result.error_message}")
    return StashError(f"trace {wanted.trace_id}: ingest answered state {result.state} ({result.error_message})")
