"""Review grants and the access they give, through the real IngestServicer on PostgreSQL: an owner shares every
trace or chosen sources; a reviewer reads and annotates those and nothing else; revoking takes effect at once."""

from typing import Any

import grpc
import pytest
from google.protobuf import field_mask_pb2

from stash.rm.v1 import ingest_pb2
from support.ingest import OTHER_OWNER, OWNER, import_payload, stash_line

REVIEWER = "reviewer-r"


@pytest.fixture
def traces(ingest: Any) -> dict[str, str]:
    """Two of the owner's traces from two sources, and one of another owner's, by source id."""
    return {
        "shop": import_payload(ingest, stash_line("shop-1"), source_id="shop").trace_ids[0],
        "lab": import_payload(ingest, stash_line("lab-1"), source_id="lab").trace_ids[0],
        "other": import_payload(ingest, stash_line("other-1"), owner=OTHER_OWNER, source_id="shop").trace_ids[0],
    }


def _grant(stub: Any, *source_ids: str, owner: str = OWNER, reviewer: str = REVIEWER) -> Any:
    request = ingest_pb2.PutReviewGrantRequest(
        owner_id=owner, reviewer_id=reviewer, all_sources=not source_ids, source_ids=source_ids
    )
    return stub.PutReviewGrant(request, timeout=30)


def _refused(call: Any) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        call()
    return caught.value


def _shared(stub: Any, reviewer: str = REVIEWER, **fields: Any) -> list[str]:
    request = ingest_pb2.ListTracesRequest(owner_id=reviewer, shared_with_me=True, **fields)
    return sorted(item.source_id for item in stub.ListTraces(request, timeout=30).traces)


def _access(stub: Any, trace_id: str, caller: str = REVIEWER) -> Any:
    return stub.AuthorizeTrace(ingest_pb2.AuthorizeTraceRequest(owner_id=caller, trace_id=trace_id), timeout=30)


def test_a_grant_is_listed_changed_and_revoked_by_its_owner(ingest: Any, traces: dict[str, str]) -> None:
    first = _grant(ingest, "shop")
    changed = _grant(ingest, "lab", "shop")

    assert first.created and not changed.created
    assert (changed.grant.all_sources, list(changed.grant.source_ids)) == (False, ["lab", "shop"])
    given = ingest.ListReviewGrants(ingest_pb2.ListReviewGrantsRequest(owner_id=OWNER), timeout=30).grants
    received = ingest.ListReviewGrants(
        ingest_pb2.ListReviewGrantsRequest(owner_id=REVIEWER, shared_with_me=True), timeout=30
    ).grants
    assert (
        [(g.owner_id, g.reviewer_id) for g in given]
        == [(OWNER, REVIEWER)]
        == [(g.owner_id, g.reviewer_id) for g in received]
    )
    ingest.DeleteReviewGrant(ingest_pb2.DeleteReviewGrantRequest(owner_id=OWNER, reviewer_id=REVIEWER), timeout=30)
    assert _shared(ingest) == []
    again = _refused(
        lambda: ingest.DeleteReviewGrant(
            ingest_pb2.DeleteReviewGrantRequest(owner_id=OWNER, reviewer_id=REVIEWER), timeout=30
        )
    )
    assert again.code() == grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"reviewer_id": OWNER, "all_sources": True}, "name another user"),
        ({"reviewer_id": REVIEWER}, "name at least one source id"),
        ({"reviewer_id": REVIEWER, "all_sources": True, "source_ids": ["shop"]}, "not both"),
        ({"reviewer_id": REVIEWER, "source_ids": ["x" * 201]}, "1 to 200 characters"),
    ],
)
def test_bad_grants_are_refused_with_the_reason(ingest: Any, fields: dict[str, Any], message: str) -> None:
    error = _refused(lambda: ingest.PutReviewGrant(ingest_pb2.PutReviewGrantRequest(owner_id=OWNER, **fields)))

    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and message in error.details()


def test_a_grant_of_one_source_shares_only_that_source(ingest: Any, traces: dict[str, str]) -> None:
    _grant(ingest, "shop")

    assert _shared(ingest) == ["shop"]
    assert (_access(ingest, traces["shop"]).trace_owner_id, _access(ingest, traces["shop"]).reviewer) == (OWNER, True)
    for hidden in (traces["lab"], traces["other"]):
        assert _refused(lambda hidden=hidden: _access(ingest, hidden)).code() == grpc.StatusCode.NOT_FOUND
    owner_view = _access(ingest, traces["lab"], caller=OWNER)
    assert (owner_view.trace_owner_id, owner_view.reviewer) == (OWNER, False)


def test_shared_lists_filter_by_owner_and_source_like_the_own_list(ingest: Any, traces: dict[str, str]) -> None:
    _grant(ingest)
    _grant(ingest, "shop", owner=OTHER_OWNER)

    assert _shared(ingest) == ["lab", "shop", "shop"]
    assert _shared(ingest, trace_owner_id=OTHER_OWNER) == ["shop"]
    assert _shared(ingest, source_id="lab") == ["lab"]
    own = ingest.ListTraces(ingest_pb2.ListTracesRequest(owner_id=REVIEWER), timeout=30)
    assert own.page_info.total == 0
    unshared = ingest.ListTraces(ingest_pb2.ListTracesRequest(owner_id=REVIEWER, trace_owner_id=OWNER), timeout=30)
    assert unshared.page_info.total == 0


def _shared_sources(stub: Any, reviewer: str = REVIEWER) -> list[tuple[str, str, str, int]]:
    request = ingest_pb2.ListTraceSourcesRequest(owner_id=reviewer, shared_with_me=True)
    sources = stub.ListTraceSources(request, timeout=30).sources
    return [(source.owner_id, source.source_id, source.name, source.trace_count) for source in sources]


def test_shared_sources_are_the_granted_ones_with_each_owner_s_names(ingest: Any, traces: dict[str, str]) -> None:
    rename = ingest_pb2.RenameTraceSourceRequest(owner_id=OWNER, source_id="shop", name="The shop")
    ingest.RenameTraceSource(rename, timeout=30)
    _grant(ingest, "shop", "never-used")
    _grant(ingest, owner=OTHER_OWNER)

    assert _shared_sources(ingest) == sorted([(OWNER, "shop", "The shop", 1), (OTHER_OWNER, "shop", "shop", 1)])
    assert _shared_sources(ingest, reviewer="stranger") == []
    own = ingest.ListTraceSources(ingest_pb2.ListTraceSourcesRequest(owner_id=REVIEWER), timeout=30)
    assert list(own.sources) == []
    ingest.DeleteReviewGrant(ingest_pb2.DeleteReviewGrantRequest(owner_id=OWNER, reviewer_id=REVIEWER), timeout=30)
    assert _shared_sources(ingest) == [(OTHER_OWNER, "shop", "shop", 1)]


def test_a_reviewer_reads_and_annotates_but_cannot_delete_or_use_the_trace(ingest: Any, traces: dict[str, str]) -> None:
    _grant(ingest, "shop")
    trace_id = traces["shop"]
    detail = ingest.GetTrace(ingest_pb2.GetTraceRequest(owner_id=REVIEWER, trace_id=trace_id), timeout=30)
    annotation = ingest.CreateAnnotation(
        ingest_pb2.CreateAnnotationRequest(
            owner_id=REVIEWER, author_name="rita", trace_id=trace_id, step_id=detail.trace.steps[2].id, rating=-1
        ),
        timeout=30,
    ).annotation

    assert detail.summary.source_owner_id == OWNER
    assert (annotation.author_id, annotation.author_name) == (REVIEWER, "rita")
    owners_view = ingest.GetTrace(ingest_pb2.GetTraceRequest(owner_id=OWNER, trace_id=trace_id), timeout=30)
    assert [item.author_name for item in owners_view.annotations] == ["rita"]
    for call in (
        lambda: ingest.DeleteTrace(ingest_pb2.DeleteTraceRequest(owner_id=REVIEWER, trace_id=trace_id), timeout=30),
        lambda: ingest.BatchGetTraces(
            ingest_pb2.BatchGetTracesRequest(owner_id=REVIEWER, trace_ids=[trace_id]), timeout=30
        ),
    ):
        error = _refused(call)
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED and "only its owner can" in error.details()


def _update(stub: Any, caller: str, annotation_id: str, **fields: Any) -> Any:
    request = ingest_pb2.UpdateAnnotationRequest(
        owner_id=caller, annotation_id=annotation_id, update_mask=field_mask_pb2.FieldMask(paths=list(fields)), **fields
    )
    return stub.UpdateAnnotation(request, timeout=30).annotation


def _annotate(stub: Any, caller: str, name: str, trace_id: str) -> Any:
    request = ingest_pb2.CreateAnnotationRequest(owner_id=caller, author_name=name, trace_id=trace_id, comment="hm")
    return stub.CreateAnnotation(request, timeout=30).annotation


def test_only_authors_change_annotations_and_anyone_reading_flags_label_errors(
    ingest: Any, traces: dict[str, str]
) -> None:
    _grant(ingest, "shop")
    trace_id = traces["shop"]
    owners = _annotate(ingest, OWNER, "olga", trace_id)
    reviewers = _annotate(ingest, REVIEWER, "rita", trace_id)

    assert _update(ingest, REVIEWER, reviewers.id, comment="mine").comment == "mine"
    refused = _refused(lambda: _update(ingest, REVIEWER, owners.id, comment="theirs"))
    assert refused.code() == grpc.StatusCode.PERMISSION_DENIED and "written by olga" in refused.details()
    flagged = _update(ingest, REVIEWER, owners.id, label_error=True, label_error_note="wrong step")
    assert (flagged.label_error, flagged.label_error_note, flagged.comment) == (True, "wrong step", "hm")
    not_theirs = _refused(
        lambda: ingest.DeleteAnnotation(
            ingest_pb2.DeleteAnnotationRequest(owner_id=REVIEWER, annotation_id=owners.id), timeout=30
        )
    )
    assert not_theirs.code() == grpc.StatusCode.PERMISSION_DENIED
    ingest.DeleteAnnotation(ingest_pb2.DeleteAnnotationRequest(owner_id=OWNER, annotation_id=reviewers.id), timeout=30)


def test_revoking_a_grant_hides_the_traces_and_their_annotations_on_the_next_call(
    ingest: Any, traces: dict[str, str]
) -> None:
    _grant(ingest)
    annotation = _annotate(ingest, REVIEWER, "rita", traces["lab"])
    ingest.DeleteReviewGrant(ingest_pb2.DeleteReviewGrantRequest(owner_id=OWNER, reviewer_id=REVIEWER), timeout=30)

    for call in (
        lambda: ingest.GetTrace(ingest_pb2.GetTraceRequest(owner_id=REVIEWER, trace_id=traces["lab"]), timeout=30),
        lambda: _update(ingest, REVIEWER, annotation.id, comment="late"),
        lambda: _annotate(ingest, REVIEWER, "rita", traces["lab"]),
    ):
        assert _refused(call).code() == grpc.StatusCode.NOT_FOUND
