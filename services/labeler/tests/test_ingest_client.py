"""IngestClient: ingest's messages become LabelerTraces and its statuses become stash_common errors."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from stash.rm.v1 import common_pb2, ingest_pb2
from stash_common.errors import FailedPrecondition, NotFound, StashError, Unavailable
from stash_labeler.ingest_client import IngestClient, trace_from_proto
from stash_labeler.traces import TraceRevision


class FailedCall(grpc.RpcError):
    """What a stub raises when ingest answers with a status."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


class Stub:
    """Answers every call with `answer`, or raises it when it is an error."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def __getattr__(self, _method: str) -> Any:
        def call(_request: Any, timeout: float) -> Any:
            if isinstance(self.answer, Exception):
                raise self.answer
            return self.answer

        return call


def test_a_revision_becomes_a_labeler_trace_of_its_owner() -> None:
    message = common_pb2.Trace(id="t1", revision=3, source_format="otel", external_id="abc")
    message.steps.add(id="s0", index=0, role=common_pb2.STEP_ROLE_USER, content="hi")

    trace = IngestClient(Stub(ingest_pb2.GetTraceRevisionResponse(trace=message))).trace_revision("alice", "t1", 3)

    assert (trace.id, trace.owner_id, trace.revision, trace.external_id) == ("t1", "alice", 3, "abc")
    assert [(step.id, step.role, step.content) for step in trace.steps] == [("s0", "user", "hi")]
    assert trace_from_proto("alice", common_pb2.Trace(id="t2")).external_id is None


def test_a_page_of_changed_revisions_keeps_its_order_and_cursor() -> None:
    page = ingest_pb2.ListTraceRevisionsResponse(
        revisions=[
            ingest_pb2.TraceRevision(owner_id="a", trace_id="t1", revision=2),
            ingest_pb2.TraceRevision(owner_id="b", trace_id="t2", revision=1),
        ],
        next_cursor="c2",
    )

    found = IngestClient(Stub(page)).changed_revisions("c1", 500)

    assert found.revisions == (TraceRevision("a", "t1", 2), TraceRevision("b", "t2", 1))
    assert found.next_cursor == "c2"


@pytest.mark.parametrize(
    ("code", "error", "message"),
    [
        (grpc.StatusCode.NOT_FOUND, NotFound, "its reason"),
        (grpc.StatusCode.FAILED_PRECONDITION, FailedPrecondition, "its reason"),
        (grpc.StatusCode.UNAVAILABLE, Unavailable, "ingest answered UNAVAILABLE: its reason"),
        (grpc.StatusCode.DEADLINE_EXCEEDED, Unavailable, "ingest answered DEADLINE_EXCEEDED: its reason"),
        (grpc.StatusCode.INTERNAL, StashError, "ingest answered INTERNAL: its reason"),
    ],
)
def test_a_failed_call_becomes_the_error_of_its_status(
    code: grpc.StatusCode, error: type[StashError], message: str
) -> None:
    client = IngestClient(Stub(FailedCall(code, "its reason")))

    with pytest.raises(StashError) as raised:
        client.current_revision("alice", "t1")

    assert type(raised.value) is error
    assert raised.value.message == message
    assert raised.value.permanent is (error is not Unavailable)
