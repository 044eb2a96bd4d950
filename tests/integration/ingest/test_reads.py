"""Reading stored traces through the real IngestServicer: one at a time and several at once."""

from typing import Any

import grpc
import orjson
import pytest

from stash.rm.v1 import ingest_pb2
from support.ingest import OTHER_OWNER, OWNER, import_payload, stash_line


@pytest.fixture
def trace_ids(ingest: Any) -> list[str]:
    lines = "\n".join(stash_line(name) for name in ("first", "second", "third"))
    return list(import_payload(ingest, lines).trace_ids)


def _batch(stub: Any, trace_ids: list[str], owner: str = OWNER, **fields: Any) -> Any:
    request = ingest_pb2.BatchGetTracesRequest(owner_id=owner, trace_ids=trace_ids, **fields)
    return stub.BatchGetTraces(request, timeout=30)


def _annotate(stub: Any, trace_id: str, comment: str) -> None:
    request = ingest_pb2.CreateAnnotationRequest(owner_id=OWNER, trace_id=trace_id, comment=comment)
    stub.CreateAnnotation(request, timeout=30)


def test_batch_get_returns_the_traces_in_request_order(ingest: Any, trace_ids: list[str]) -> None:
    wanted = [trace_ids[2], trace_ids[0]]

    response = _batch(ingest, wanted)

    assert [trace.id for trace in response.traces] == wanted
    assert [trace.external_id for trace in response.traces] == ["third", "first"]
    single = ingest.GetTrace(ingest_pb2.GetTraceRequest(owner_id=OWNER, trace_id=wanted[0]), timeout=30).trace
    assert response.traces[0] == single
    assert list(response.annotations) == []


def test_batch_get_includes_annotations_only_when_asked(ingest: Any, trace_ids: list[str]) -> None:
    _annotate(ingest, trace_ids[0], "too slow")
    _annotate(ingest, trace_ids[1], "fine")

    plain = _batch(ingest, trace_ids[:1])
    annotated = _batch(ingest, trace_ids[:1], include_annotations=True)

    assert list(plain.annotations) == []
    assert [(item.trace_id, item.comment) for item in annotated.annotations] == [(trace_ids[0], "too slow")]


def test_batch_get_names_the_first_trace_the_owner_does_not_have(ingest: Any, trace_ids: list[str]) -> None:
    others = import_payload(ingest, stash_line("theirs"), owner=OTHER_OWNER).trace_ids[0]

    with pytest.raises(grpc.RpcError) as caught:
        _batch(ingest, [trace_ids[0], others, "missing"])

    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    assert others in caught.value.details()


def _revisions(stub: Any, wanted: list[tuple[str, int]], owner: str = OWNER) -> list[Any]:
    request = ingest_pb2.BatchGetTraceRevisionsRequest(
        owner_id=owner, wanted=[ingest_pb2.WantedRevision(trace_id=trace_id, revision=rev) for trace_id, rev in wanted]
    )
    return list(stub.BatchGetTraceRevisions(request, timeout=30).results)


def test_batch_get_revisions_answers_each_in_request_order_without_spans(ingest: Any, trace_ids: list[str]) -> None:
    grown = orjson.loads(stash_line("second"))
    grown["steps"].append({"role": "user", "content": "Thanks!"})
    import_payload(ingest, orjson.dumps(grown).decode())  # "second" is now at revision 2
    others = import_payload(ingest, stash_line("theirs"), owner=OTHER_OWNER).trace_ids[0]

    results = _revisions(ingest, [(trace_ids[2], 1), (trace_ids[1], 1), (others, 1), ("missing", 1), (trace_ids[0], 1)])

    found = ingest_pb2.REVISION_STATE_FOUND
    assert [item.state for item in results] == [
        found,
        ingest_pb2.REVISION_STATE_SUPERSEDED,
        ingest_pb2.REVISION_STATE_NOT_FOUND,
        ingest_pb2.REVISION_STATE_NOT_FOUND,
        found,
    ]
    assert results[1].error_message == "the trace is at revision 2, not 1"
    assert others not in str(results[2])  # another owner's trace is answered like a missing one
    single = ingest.GetTraceRevision(
        ingest_pb2.GetTraceRevisionRequest(owner_id=OWNER, trace_id=trace_ids[2], revision=1), timeout=30
    ).trace
    del single.spans[:]
    assert results[0].trace == single
    assert [trace.external_id for trace in (results[0].trace, results[4].trace)] == ["third", "first"]


def test_batch_get_revisions_refuses_more_than_a_call_takes(ingest: Any) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        _revisions(ingest, [(f"t{n}", 1) for n in range(501)])

    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "at most 500" in caught.value.details()
