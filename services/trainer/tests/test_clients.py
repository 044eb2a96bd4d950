"""The edge to ingest, the labeler and the scorer: messages as the trainer's dataclasses, failures as its errors."""

from __future__ import annotations

import math

import grpc
import pytest
from google.protobuf import struct_pb2

from stash.rm.v1 import common_pb2, ingest_pb2, labeler_pb2, scorer_pb2
from stash_common.errors import FailedPrecondition, InvalidArgument, NotFound, StashError, Unavailable
from stash_common.jobs.lifecycle import retry_repeats
from stash_common.steps import TraceStep
from stash_trainer.clients import ScoreClient, TraceClient, trace_from_proto
from stash_trainer.dispatcher import PublishedScores
from stash_trainer.pairs.inputs import Annotation, StepCredit


def _struct(value: dict) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    message.update(value)
    return message


def _trace() -> common_pb2.Trace:
    return common_pb2.Trace(
        id="t1",
        revision=3,
        steps=[
            common_pb2.Step(id="s0", index=0, role=common_pb2.STEP_ROLE_USER, content="Where is order 1182?"),
            common_pb2.Step(
                id="s1",
                index=1,
                role=common_pb2.STEP_ROLE_ASSISTANT,
                tool_name="lookup_order",
                tool_input=_struct({"order_id": 1182, "weight": 1.5, "tags": [2, "x"]}),
                tool_call_id="c1",
            ),
            common_pb2.Step(id="s2", index=2, role=common_pb2.STEP_ROLE_TOOL, content="shipped", tool_call_id="c1"),
        ],
    )


def _evaluation(status: int, *steps: labeler_pb2.StepEvaluation) -> labeler_pb2.TraceEvaluation:
    return labeler_pb2.TraceEvaluation(trace_id="t1", status=status, steps=steps)


def test_trace_from_proto_converts_steps_annotations_and_credits() -> None:
    annotation = common_pb2.Annotation(
        id="a1", trace_id="t1", step_id="s1", rating=-1, author_id="u1", author_name="rita"
    )
    evaluation = _evaluation(
        common_pb2.JOB_STATUS_SUCCEEDED,
        labeler_pb2.StepEvaluation(step_id="s1", step_index=1, expected_credit=-0.35, ordinal_credit=-1),
        labeler_pb2.StepEvaluation(step_id="s2", step_index=2),
    )

    trace = trace_from_proto(_trace(), [annotation], evaluation)

    assert trace.steps[1] == TraceStep(
        "s1", 1, "assistant", "", "lookup_order", {"order_id": 1182, "weight": 1.5, "tags": [2, "x"]}, "c1", {}
    )
    assert trace.steps[2].tool_name is None and trace.steps[2].role == "tool"
    assert trace.annotations == (Annotation("a1", "s1", -1, None, False, "u1", author_name="rita"),)
    assert trace.credits == (StepCredit("s1", -0.35, -1), StepCredit("s2", None, None))


def test_trace_from_proto_keeps_a_comments_quote_and_author_so_it_can_be_a_correction() -> None:
    quoted = common_pb2.Annotation(
        id="a2", trace_id="t1", step_id="s1", comment="wrong order", quote=common_pb2.Quote(text="1182"), author_id="u2"
    )
    flagged = common_pb2.Annotation(
        id="a3", trace_id="t1", step_id="s1", comment="typo", quote=common_pb2.Quote(text="1182"), label_error=True
    )

    trace = trace_from_proto(_trace(), [quoted, flagged], None)

    assert [(a.quote, a.author_id, a.is_correction) for a in trace.annotations] == [
        ("1182", "u2", True),
        ("1182", "", False),
    ]


def test_trace_from_proto_reads_no_credit_from_an_unfinished_evaluation() -> None:
    evaluation = _evaluation(
        common_pb2.JOB_STATUS_RUNNING, labeler_pb2.StepEvaluation(step_id="s1", expected_credit=0.5)
    )

    assert trace_from_proto(_trace(), [], evaluation).credits == ()
    assert trace_from_proto(_trace(), [], None).credits == ()


@pytest.mark.parametrize("credit", [math.nan, math.inf, 1.5])
def test_trace_from_proto_leaves_malformed_credit_unscored(credit: float) -> None:
    evaluation = _evaluation(
        common_pb2.JOB_STATUS_SUCCEEDED, labeler_pb2.StepEvaluation(step_id="s1", expected_credit=credit)
    )

    assert trace_from_proto(_trace(), [], evaluation).credits == (StepCredit("s1", None, None),)


def test_trace_from_proto_drops_credits_of_steps_the_trace_no_longer_has() -> None:
    evaluation = _evaluation(
        common_pb2.JOB_STATUS_SUCCEEDED, labeler_pb2.StepEvaluation(step_id="gone", expected_credit=0.5)
    )

    assert trace_from_proto(_trace(), [], evaluation).credits == ()


def test_trace_from_proto_refuses_an_annotation_of_another_trace() -> None:
    stray = common_pb2.Annotation(id="a2", trace_id="t9", rating=1)

    with pytest.raises(InvalidArgument, match="annotation a2 belongs to trace t9, not t1"):
        trace_from_proto(_trace(), [stray], None)


class _PeerError(grpc.RpcError):
    """A peer's failed call with its status and details."""

    def __init__(self, status: grpc.StatusCode, details: str) -> None:
        self._status, self._details = status, details

    def code(self) -> grpc.StatusCode:
        return self._status

    def details(self) -> str:
        return self._details


class _DownIngest:
    def GetTrace(self, request: ingest_pb2.GetTraceRequest, timeout: float) -> ingest_pb2.GetTraceResponse:
        raise _PeerError(grpc.StatusCode.UNAVAILABLE, "connection refused")

    def ListTraces(self, request: ingest_pb2.ListTracesRequest, timeout: float) -> ingest_pb2.ListTracesResponse:
        raise _PeerError(grpc.StatusCode.UNAVAILABLE, "connection refused")


def test_a_failed_peer_call_becomes_unavailable_naming_its_status() -> None:
    client = TraceClient(_DownIngest(), None)

    with pytest.raises(Unavailable, match="^could not read the selected traces: UNAVAILABLE: connection refused$"):
        client.source_trace("owner", "t1")
    with pytest.raises(Unavailable, match="UNAVAILABLE: connection refused"):
        client.first_unowned("owner", ["t1"])


class _IngestWithoutT1:
    def GetTrace(self, request: ingest_pb2.GetTraceRequest, timeout: float) -> ingest_pb2.GetTraceResponse:
        raise _PeerError(grpc.StatusCode.NOT_FOUND, "trace t1 not found")


def test_a_trace_deleted_since_it_was_selected_is_not_found_which_a_retry_repeats() -> None:
    client = TraceClient(_IngestWithoutT1(), None)

    with pytest.raises(NotFound, match="^could not read the selected traces: NOT_FOUND: trace t1 not found$") as gone:
        client.source_trace("owner", "t1")
    assert retry_repeats(gone.value)


class _PagedIngest:
    """Owns t1…t3 and answers two traces a page, as ingest pages ListTraces."""

    def ListTraces(self, request: ingest_pb2.ListTracesRequest, timeout: float) -> ingest_pb2.ListTracesResponse:
        owned = [trace_id for trace_id in request.trace_ids if trace_id in {"t1", "t2", "t3"}]
        page = owned[request.page.offset : request.page.offset + 2]
        return ingest_pb2.ListTracesResponse(
            traces=[common_pb2.TraceSummary(id=trace_id) for trace_id in page],
            page_info=common_pb2.PageInfo(total=len(owned)),
        )


def test_first_unowned_reads_every_page_and_names_the_first_missing_trace() -> None:
    client = TraceClient(_PagedIngest(), None)

    assert client.first_unowned("owner", ["t1", "t2", "t3"]) is None
    assert client.first_unowned("owner", ["t3", "t9", "t1", "t8"]) == "t9"


def test_trace_from_proto_keeps_the_revision_it_read() -> None:
    assert trace_from_proto(_trace(), [], None).revision == 3


class _RecordingScorer:
    def __init__(self) -> None:
        self.requests: list[scorer_pb2.PublishTrainingScoresRequest] = []

    def PublishTrainingScores(
        self, request: scorer_pb2.PublishTrainingScoresRequest, timeout: float
    ) -> scorer_pb2.PublishTrainingScoresResponse:
        self.requests.append(request)
        return scorer_pb2.PublishTrainingScoresResponse(published_traces=1, rejected_traces=1)


def test_the_score_client_sends_the_training_jobs_key_and_returns_the_counts() -> None:
    scorer = _RecordingScorer()

    published = ScoreClient(scorer).publish_training_scores("owner", "m1", "jobs/trainer/job-1")

    assert published == PublishedScores(published=1, rejected=1)
    (request,) = scorer.requests
    assert (request.owner_id, request.reward_model_id, request.job_key) == ("owner", "m1", "jobs/trainer/job-1")


class _Failing(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode) -> None:
        self._code = code

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return "why"


class _FailingScorer:
    def __init__(self, code: grpc.StatusCode) -> None:
        self.code = code

    def PublishTrainingScores(
        self, request: scorer_pb2.PublishTrainingScoresRequest, timeout: float
    ) -> scorer_pb2.PublishTrainingScoresResponse:
        raise _Failing(self.code)


@pytest.mark.parametrize(
    ("code", "error", "message"),
    [
        (grpc.StatusCode.UNAVAILABLE, Unavailable, "the scorer is out of reach (UNAVAILABLE); retry shortly"),
        (
            grpc.StatusCode.DEADLINE_EXCEEDED,
            Unavailable,
            "the scorer is out of reach (DEADLINE_EXCEEDED); retry shortly",
        ),
        (grpc.StatusCode.NOT_FOUND, NotFound, "why"),
        (grpc.StatusCode.FAILED_PRECONDITION, FailedPrecondition, "why"),
        (grpc.StatusCode.INVALID_ARGUMENT, InvalidArgument, "why"),
        (grpc.StatusCode.UNIMPLEMENTED, StashError, "the scorer answered UNIMPLEMENTED: why"),
    ],
)
def test_a_failed_publication_becomes_the_platform_error_of_its_status(
    code: grpc.StatusCode, error: type[StashError], message: str
) -> None:
    client = ScoreClient(_FailingScorer(code))

    with pytest.raises(error) as raised:
        client.publish_training_scores("owner", "m1", "jobs/trainer/job-1")

    assert type(raised.value) is error and raised.value.message == message
