"""IngestClient: ingest's messages become LabelerTraces and its statuses become stash_common errors."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from stash.rm.v1 import common_pb2, ingest_pb2
from stash_common.errors import FailedPrecondition, NotFound, StashError, Unavailable
from stash_labeler.clients import IngestClient, trace_from_proto
from stash_labeler.traces import LabelerTrace, TraceRevision


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


class BatchStub:
    """Answers BatchGetTraceRevisions from `answers` by owner, recording what each call asked for."""

    def __init__(self, answers: dict[str, list[ingest_pb2.TraceRevisionResult]]) -> None:
        self.answers = answers
        self.asked: list[tuple[str, list[str]]] = []

    def BatchGetTraceRevisions(self, request: ingest_pb2.BatchGetTraceRevisionsRequest, timeout: float) -> Any:
        self.asked.append((request.owner_id, [wanted.trace_id for wanted in request.wanted]))
        return ingest_pb2.BatchGetTraceRevisionsResponse(results=self.answers[request.owner_id])


def test_revisions_are_read_in_one_call_per_owner_and_answered_in_order() -> None:
    result = ingest_pb2.TraceRevisionResult
    found = result(state=ingest_pb2.REVISION_STATE_FOUND, trace=common_pb2.Trace(id="t1", revision=2))
    missing = result(state=ingest_pb2.REVISION_STATE_NOT_FOUND, error_message="not found")
    superseded = result(state=ingest_pb2.REVISION_STATE_SUPERSEDED, error_message="at 3")
    stub = BatchStub({"alice": [found, missing], "bob": [superseded]})
    wanted = [TraceRevision("alice", "t1", 2), TraceRevision("bob", "t2", 2), TraceRevision("alice", "t3", 1)]

    read = IngestClient(stub).trace_revisions(wanted)

    assert stub.asked == [("alice", ["t1", "t3"]), ("bob", ["t2"])]
    assert isinstance(read[0], LabelerTrace) and (read[0].id, read[0].owner_id) == ("t1", "alice")
    assert type(read[1]) is FailedPrecondition and read[1].message == "trace t2: at 3"
    assert type(read[2]) is NotFound and read[2].message == "trace t3: not found"


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


def test_the_current_revision_is_the_owner_s_own_trace_s_or_not_found() -> None:
    listed = ingest_pb2.ListTracesResponse(traces=[common_pb2.TraceSummary(id="t1", revision=4)])

    assert IngestClient(Stub(listed)).current_revision("alice", "t1") == 4
    with pytest.raises(NotFound, match="trace t1 not found"):
        IngestClient(Stub(ingest_pb2.ListTracesResponse())).current_revision("alice", "t1")


@pytest.mark.parametrize(
    ("code", "error", "message"),
    [
        (grpc.StatusCode.NOT_FOUND, NotFound, "its reason"),
        (grpc.StatusCode.FAILED_PRECONDITION, FailedPrecondition, "its reason"),
        (grpc.StatusCode.UNAVAILABLE, Unavailable, "ingest is out of reach (UNAVAILABLE); retry shortly"),
        (grpc.StatusCode.DEADLINE_EXCEEDED, Unavailable, "ingest is out of reach (DEADLINE_EXCEEDED); retry shortly"),
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
