"""The trainer's view of `stash.rm.v1` traces, annotations and labeler evaluations."""

from __future__ import annotations

import math

import pytest
from google.protobuf import struct_pb2

from stash.rm.v1 import common_pb2, labeler_pb2
from stash_common.errors import InvalidArgument
from stash_common.steps import TraceStep
from stash_trainer.pairs.inputs import Annotation, SourceTrace, StepCredit, trace_from_proto


def _struct(value: dict) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    message.update(value)
    return message


def _trace() -> common_pb2.Trace:
    return common_pb2.Trace(
        id="t1",
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
    annotation = common_pb2.Annotation(id="a1", trace_id="t1", step_id="s1", rating=-1, author_id="u1")
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
    assert trace.annotations == (Annotation("a1", "s1", -1, None, False, "u1"),)
    assert trace.credits == (StepCredit("s1", -0.35, -1), StepCredit("s2", None, None))


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


def test_source_trace_requires_step_indices_to_be_positions() -> None:
    with pytest.raises(InvalidArgument, match=r"steps\[0\].index: is 3, expected 0"):
        SourceTrace("t1", (TraceStep("s", 3, "user", "hi"),))


def test_usable_rating_ignores_flagged_and_missing_ratings() -> None:
    assert Annotation("a", None, 1, None).usable_rating == 1
    assert Annotation("a", None, -1, None, label_error=True).usable_rating is None
    assert Annotation("a", None, None, "nice").usable_rating is None
