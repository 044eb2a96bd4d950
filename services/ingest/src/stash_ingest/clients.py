"""LabelerClient: ingest's one call to another service, announcing trace revisions to the labeler.

This is the edge between `revisions.Revision` and the labeler's messages: the `Announcer` in
`revisions.py` decides when and how hard to announce without importing grpc, and a failed call
reaches it as `Unavailable` naming the labeler's status.
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc

from stash.rm.v1 import labeler_pb2, labeler_pb2_grpc
from stash_common.errors import Unavailable
from stash_ingest.revisions import Revision

ANNOUNCE_TIMEOUT_S = 5.0


class LabelerClient:
    """Tells the labeler about new trace revisions, one owner's at a time."""

    def __init__(self, stub: labeler_pb2_grpc.LabelerServiceStub) -> None:
        self.stub = stub

    def announce_revisions(self, revisions: Sequence[Revision]) -> None:
        """Send AnnounceTraceRevisions for one owner's revisions; Unavailable when the labeler does not take them."""
        announced = [labeler_pb2.AnnouncedRevision(trace_id=one.trace_id, revision=one.revision) for one in revisions]
        request = labeler_pb2.AnnounceTraceRevisionsRequest(owner_id=revisions[0].owner_id, revisions=announced)
        try:
            self.stub.AnnounceTraceRevisions(request, timeout=ANNOUNCE_TIMEOUT_S)
        except grpc.RpcError as error:
            raise Unavailable(f"the labeler did not take the announcement: {error.code().name}") from None
