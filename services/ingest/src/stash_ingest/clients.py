"""LabelerClient: ingest's one call to another service, announcing a trace revision to the labeler.

This is the edge between `revisions.Revision` and the labeler's messages: the `Announcer` in
`revisions.py` decides when and how hard to announce without importing grpc, and a failed call
reaches it as `Unavailable` naming the labeler's status.
"""

from __future__ import annotations

import grpc

from stash.rm.v1 import labeler_pb2, labeler_pb2_grpc
from stash_common.errors import Unavailable
from stash_ingest.revisions import Revision

ANNOUNCE_TIMEOUT_S = 5.0


class LabelerClient:
    """Tells the labeler about new trace revisions."""

    def __init__(self, stub: labeler_pb2_grpc.LabelerServiceStub) -> None:
        self.stub = stub

    def announce_revision(self, revision: Revision) -> None:
        """Send AnnounceTraceRevision; Unavailable when the labeler does not take it."""
        request = labeler_pb2.AnnounceTraceRevisionRequest(
            owner_id=revision.owner_id, trace_id=revision.trace_id, revision=revision.revision
        )
        try:
            self.stub.AnnounceTraceRevision(request, timeout=ANNOUNCE_TIMEOUT_S)
        except grpc.RpcError as error:
            raise Unavailable(f"the labeler did not take the announcement: {error.code().name}") from None
