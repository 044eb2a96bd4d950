"""Annotation rules, counts and owner scoping through the real IngestServicer."""

from typing import Any

import grpc
import pytest
from google.protobuf import field_mask_pb2

from stash.rm.v1 import common_pb2, ingest_pb2
from support.ingest import OTHER_OWNER, OWNER, import_payload, stash_line


@pytest.fixture
def trace(ingest: Any) -> Any:
    trace_id = import_payload(ingest, stash_line("annotated")).trace_ids[0]
    return ingest.GetTrace(ingest_pb2.GetTraceRequest(owner_id=OWNER, trace_id=trace_id), timeout=30).trace


def _annotate(stub: Any, trace: Any, owner: str = OWNER, **fields: Any) -> Any:
    request = ingest_pb2.CreateAnnotationRequest(owner_id=owner, author_name="alice", trace_id=trace.id, **fields)
    return stub.CreateAnnotation(request, timeout=30).annotation


def _refused(call: Any) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        call()
    return caught.value


def _summary(stub: Any, trace: Any) -> Any:
    return stub.GetTrace(ingest_pb2.GetTraceRequest(owner_id=OWNER, trace_id=trace.id), timeout=30).summary


def test_step_annotation_with_quote_is_stored(ingest: Any, trace: Any) -> None:
    quote = common_pb2.Quote(text="started a refund", prefix="so I have ", suffix=".")

    annotation = _annotate(ingest, trace, step_id=trace.steps[4].id, rating=-1, comment="No policy check", quote=quote)

    assert (annotation.rating, annotation.comment, annotation.quote.text) == (-1, "No policy check", "started a refund")
    assert annotation.author_name == "alice"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"rating": 2}, "must be 1, -1 or null"),
        ({}, "needs a rating, a comment, or both"),
        ({"rating": 1, "quote": common_pb2.Quote(text="refund")}, "quote needs a step_id"),
    ],
)
def test_invalid_trace_annotations_are_rejected(ingest: Any, trace: Any, fields: dict, message: str) -> None:
    error = _refused(lambda: _annotate(ingest, trace, **fields))

    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and message in error.details()


def test_quote_must_occur_in_the_step_content(ingest: Any, trace: Any) -> None:
    quote = common_pb2.Quote(text="free pizza")

    error = _refused(lambda: _annotate(ingest, trace, step_id=trace.steps[4].id, comment="?", quote=quote))

    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and "does not occur" in error.details()


def test_system_steps_take_comments_but_not_ratings(ingest: Any, trace: Any) -> None:
    system_step = trace.steps[0].id

    assert _annotate(ingest, trace, step_id=system_step, comment="too vague").comment == "too vague"
    error = _refused(lambda: _annotate(ingest, trace, step_id=system_step, rating=1))
    assert "system steps" in error.details()


def test_counts_exclude_label_error_annotations(ingest: Any, trace: Any) -> None:
    _annotate(ingest, trace, step_id=trace.steps[4].id, rating=1)
    flagged = _annotate(ingest, trace, step_id=trace.steps[2].id, rating=-1, comment="bad lookup")
    _annotate(ingest, trace, rating=-1)

    ingest.UpdateAnnotation(
        ingest_pb2.UpdateAnnotationRequest(
            owner_id=OWNER,
            annotation_id=flagged.id,
            update_mask=field_mask_pb2.FieldMask(paths=["label_error", "label_error_note"]),
            label_error=True,
            label_error_note="the lookup was right",
        ),
        timeout=30,
    )

    summary = _summary(ingest, trace)
    assert (summary.positive_count, summary.negative_count) == (1, 1)
    assert (summary.comment_count, summary.label_error_count) == (1, 1)


def test_update_mask_clears_named_fields_and_keeps_the_rest(ingest: Any, trace: Any) -> None:
    annotation = _annotate(ingest, trace, step_id=trace.steps[4].id, rating=1, comment="good")
    request = ingest_pb2.UpdateAnnotationRequest(
        owner_id=OWNER, annotation_id=annotation.id, update_mask=field_mask_pb2.FieldMask(paths=["comment"])
    )

    updated = ingest.UpdateAnnotation(request, timeout=30).annotation

    assert updated.rating == 1 and not updated.HasField("comment")


def test_another_owner_cannot_see_or_touch_annotations(ingest: Any, trace: Any) -> None:
    annotation = _annotate(ingest, trace, rating=1)

    for call in (
        lambda: _annotate(ingest, trace, owner=OTHER_OWNER, rating=1),
        lambda: ingest.DeleteAnnotation(
            ingest_pb2.DeleteAnnotationRequest(owner_id=OTHER_OWNER, annotation_id=annotation.id), timeout=30
        ),
        lambda: ingest.UpdateAnnotation(
            ingest_pb2.UpdateAnnotationRequest(
                owner_id=OTHER_OWNER,
                annotation_id=annotation.id,
                update_mask=field_mask_pb2.FieldMask(paths=["rating"]),
                rating=-1,
            ),
            timeout=30,
        ),
    ):
        assert _refused(call).code() == grpc.StatusCode.NOT_FOUND
    assert _summary(ingest, trace).positive_count == 1


def test_deleting_a_trace_deletes_its_annotations(ingest: Any, trace: Any) -> None:
    _annotate(ingest, trace, rating=1)

    ingest.DeleteTrace(ingest_pb2.DeleteTraceRequest(owner_id=OWNER, trace_id=trace.id), timeout=30)

    error = _refused(lambda: _summary(ingest, trace))
    assert error.code() == grpc.StatusCode.NOT_FOUND
    export = b"".join(
        chunk.data for chunk in ingest.ExportAnnotations(ingest_pb2.ExportAnnotationsRequest(owner_id=OWNER))
    )
    assert export == b""
