"""Proto enums reach the REST API by name: the value's name without the enum's prefix, in lower case."""

import pytest

from stash.rm.v1 import common_pb2, labeler_pb2, trainer_pb2
from stash_gateway.rest_json import ProtoEnum, enum_name

# The REST spellings the API has always answered with, value by value.
REST_NAMES: list[tuple[ProtoEnum, dict[int, str]]] = [
    (common_pb2.StepRole, {1: "system", 2: "user", 3: "assistant", 4: "tool"}),
    (common_pb2.JobStatus, {1: "queued", 2: "running", 3: "succeeded", 4: "failed"}),
    (common_pb2.Outcome, {1: "success", 2: "failure", 3: "partial_success", 4: "insufficient_evidence"}),
    (labeler_pb2.LabelSource, {1: "imported", 2: "llm", 3: "rules"}),
    (labeler_pb2.PatternSource, {1: "rules", 2: "ml"}),
    (trainer_pb2.FeedbackLabel, {1: "positive", 2: "negative", 3: "unclear"}),
    (trainer_pb2.FeedbackConfidence, {1: "high", 2: "low"}),
    (trainer_pb2.FeedbackSource, {1: "user_feedback", 2: "ai_judgment"}),
]


@pytest.mark.parametrize(("enum", "names"), REST_NAMES, ids=[enum.DESCRIPTOR.name for enum, _ in REST_NAMES])
def test_every_value_keeps_its_rest_spelling(enum: ProtoEnum, names: dict[int, str]) -> None:
    assert {value.number: enum_name(enum, value.number) for value in enum.DESCRIPTOR.values[1:]} == names


def test_the_unspecified_value_renders_as_null() -> None:
    assert enum_name(common_pb2.JobStatus, common_pb2.JOB_STATUS_UNSPECIFIED) is None


def test_a_value_newer_than_this_build_renders_as_null() -> None:
    assert enum_name(common_pb2.JobStatus, 99) is None
