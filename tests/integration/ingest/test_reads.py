"""Reading stored traces through the real IngestServicer: one at a time and several at once."""

from typing import Any

import grpc
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
