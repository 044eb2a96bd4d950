"""The gepa service's clients of the trainer and ingest: their messages meet the service's dataclasses here.

The run policy (`runs.py`) and the examples (`examples.py`) see only `RewardModelInfo` and
`ExampleTrace`, never a `stash.rm.v1` message or a gRPC error: a failed call becomes the platform
error of its status (`stash_common.channels.call_peer`), Unavailable when the peer is out of reach.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from stash.rm.v1 import common_pb2, ingest_pb2, ingest_pb2_grpc, trainer_pb2, trainer_pb2_grpc
from stash_common.channels import call_peer
from stash_common.messages import JOB_STATUSES
from stash_common.step_messages import step_from_proto
from stash_gepa.dispatcher import RewardModelInfo
from stash_gepa.examples import Comment, ExampleTrace, Finding

READ_TIMEOUT_S = 60
_STATUS_NAMES = {number: name for name, number in JOB_STATUSES.items()}


class TrainerClient:
    """Reads reward models and their recorded training pairs from the trainer."""

    def __init__(self, stub: trainer_pb2_grpc.TrainerServiceStub) -> None:
        self.stub = stub

    def reward_model(self, owner_id: str, model_id: str) -> RewardModelInfo:
        """The owner's reward model; NotFound for another owner's."""
        request = trainer_pb2.GetRewardModelRequest(owner_id=owner_id, reward_model_id=model_id)
        detail = call_peer("trainer", lambda: self.stub.GetRewardModel(request, timeout=READ_TIMEOUT_S)).reward_model
        model = detail.reward_model
        findings: dict[str, list[Finding]] = {}
        for finding in detail.feedback.findings:
            findings.setdefault(finding.trace_id, []).append(finding_of(finding))
        return RewardModelInfo(
            id=model.id,
            name=model.name,
            status=_STATUS_NAMES.get(model.status, "unknown"),
            artifact_key=model.artifact_key if model.HasField("artifact_key") else None,
            trace_ids=tuple(detail.trace_ids),
            findings={trace_id: tuple(found) for trace_id, found in findings.items()},
        )

    def training_pairs(self, owner_id: str, model_id: str) -> list[dict[str, Any]]:
        """The model's recorded training pairs, each with its evidence."""
        request = trainer_pb2.ExportPairsRequest(owner_id=owner_id, reward_model_id=model_id, with_evidence=True)
        chunks = call_peer("trainer", lambda: list(self.stub.ExportPairs(request, timeout=READ_TIMEOUT_S)))
        return [orjson.loads(line) for chunk in chunks for line in chunk.data.splitlines() if line]


class TraceClient:
    """Reads the selected traces, with their annotations, from ingest."""

    def __init__(self, stub: ingest_pb2_grpc.IngestServiceStub) -> None:
        self.stub = stub

    def example_trace(
        self, owner_id: str, trace_id: str, findings: Sequence[Finding], pairs: Sequence[Mapping[str, Any]]
    ) -> ExampleTrace:
        """One selected trace with its comments, and the training evidence about it."""
        request = ingest_pb2.GetTraceRequest(owner_id=owner_id, trace_id=trace_id)
        found = call_peer("ingest", lambda: self.stub.GetTrace(request, timeout=READ_TIMEOUT_S))
        return ExampleTrace(
            id=trace_id,
            steps=tuple(step_from_proto(step) for step in found.trace.steps),
            comments=tuple(comment_of(annotation) for annotation in found.annotations if annotation.comment),
            findings=tuple(findings),
            pairs=tuple(pairs),
        )


def comment_of(annotation: common_pb2.Annotation) -> Comment:
    """An annotation's comment."""
    return Comment(
        step_id=annotation.step_id if annotation.HasField("step_id") else None,
        text=annotation.comment,
        quote=annotation.quote.text or None,
        label_error=annotation.label_error,
        author=annotation.author_name,
    )


def finding_of(finding: trainer_pb2.FeedbackFinding) -> Finding:
    """A learning-report finding."""
    return Finding(
        step_index=finding.step_index,
        label=_enum_word(trainer_pb2.FeedbackLabel, finding.label),
        confidence=_enum_word(trainer_pb2.FeedbackConfidence, finding.confidence),
        reason=finding.reason,
        quote=finding.evidence_quote if finding.HasField("evidence_quote") else None,
        included_in_training=finding.included_in_training,
    )


def _enum_word(enum: Any, value: int) -> str:
    # FEEDBACK_LABEL_POSITIVE → "positive"
    return str(enum.Name(value)).rsplit("_", 1)[-1].lower()
