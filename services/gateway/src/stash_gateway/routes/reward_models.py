"""/reward-models and /export/pairs: personal reward models trained on the caller's selected traces."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Response, status
from fastapi.responses import StreamingResponse
from pydantic import Field

from stash.rm.v1 import common_pb2, trainer_pb2
from stash_common.messages import struct_of
from stash_common.model_quality import model_quality
from stash_gateway.access import refuse_reviewed
from stash_gateway.auth import Reader, Writer
from stash_gateway.openapi import ClosedBody, RequestBody
from stash_gateway.rest_json import enum_name, optional, struct_json, timestamp_json
from stash_gateway.routes import API_PREFIX
from stash_gateway.routes.exports import download
from stash_gateway.state import Services, Settings

router = APIRouter(prefix=API_PREFIX, tags=["reward models"])


class TrainingConfigBody(ClosedBody):
    """`{"input_version": 3, "annotation_source": "automatic", ...}`: train on the labeler's automatic action credit
    (the one configuration the trainer supports; it checks it again)."""

    input_version: Literal[3]
    annotation_source: Literal["automatic"]
    criteria: list[Annotated[str, Field(min_length=1, max_length=200)]] | None = Field(
        None, min_length=1, max_length=8, description="AI preference generation's criteria instead of the four defaults"
    )
    max_actions_per_trace: int | None = Field(
        None, ge=1, le=10_000, description="assess at most this many actions of each trace, a seeded sample"
    )
    action_sample_seed: int | None = Field(
        None, ge=0, lt=2**31, description="the sample's seed; unset with a limit: drawn and recorded"
    )


class RewardModelBody(RequestBody):
    """`POST /reward-models`: a name and the traces to learn from, with optional training settings."""

    name: str = Field(min_length=1, max_length=200)
    trace_ids: list[str] = Field(
        description="the selected traces: at least two, so that evaluation can hold out whole traces (422 otherwise)"
    )
    base_model: str | None = Field(None, description="a local path, hub id or the packaged model; server default")
    epochs: int | None = Field(None, ge=1, le=50)
    max_pairs: int | None = Field(None, ge=2, le=100_000)
    training_config: TrainingConfigBody | None = Field(None, description="unset: train on human ratings")


@router.post("/reward-models", summary="Train a reward model on selected traces")
def create_reward_model(
    services: Services, settings: Settings, body: RewardModelBody, principal: Writer
) -> dict[str, Any]:
    """`RewardModel` with status `queued`; 404 naming the first trace the caller does not own, 403 for a trace the
    caller only reviews."""
    if body.trace_ids:
        refuse_reviewed(services, settings, principal, body.trace_ids)
    message = trainer_pb2.CreateRewardModelRequest(
        owner_id=principal.user_id,
        name=body.name,
        trace_ids=body.trace_ids,
        base_model=body.base_model,
        epochs=body.epochs,
        max_pairs=body.max_pairs,
        training_config=struct_of(body.training_config.model_dump(exclude_none=True) if body.training_config else None),
    )
    return model_json(services.trainer.CreateRewardModel(message, timeout=settings.rpc_timeout_s).reward_model)


@router.get("/reward-models", summary="The caller's reward models, newest first")
def list_reward_models(services: Services, settings: Settings, principal: Reader) -> list[dict[str, Any]]:
    """`[RewardModel]`."""
    message = trainer_pb2.ListRewardModelsRequest(owner_id=principal.user_id)
    response = services.trainer.ListRewardModels(message, timeout=settings.rpc_timeout_s)
    return [model_json(model) for model in response.reward_models]


@router.get("/reward-models/{model_id}", summary="One reward model with its traces and learning report")
def get_reward_model(services: Services, settings: Settings, model_id: str, principal: Reader) -> dict[str, Any]:
    """`RewardModelDetail`: the model, `trace_ids`, and `feedback` (null before extraction was recorded, `[]` when it
    found nothing to learn from); `feedback_from_earlier_attempt` when a retry still shows the last report."""
    message = trainer_pb2.GetRewardModelRequest(owner_id=principal.user_id, reward_model_id=model_id)
    detail = services.trainer.GetRewardModel(message, timeout=settings.rpc_timeout_s).reward_model
    feedback = [feedback_json(item) for item in detail.feedback.findings] if detail.HasField("feedback") else None
    return {
        **model_json(detail.reward_model),
        "trace_ids": list(detail.trace_ids),
        "feedback": feedback,
        "feedback_from_earlier_attempt": detail.feedback_from_earlier_attempt,
    }


@router.post("/reward-models/{model_id}/retry", status_code=status.HTTP_202_ACCEPTED, summary="Retry a failed model")
def retry_reward_model(services: Services, settings: Settings, model_id: str, principal: Writer) -> dict[str, Any]:
    """`RewardModel` queued again with the same id and traces; 409 unless it failed."""
    message = trainer_pb2.RetryRewardModelRequest(owner_id=principal.user_id, reward_model_id=model_id)
    return model_json(services.trainer.RetryRewardModel(message, timeout=settings.rpc_timeout_s).reward_model)


@router.delete("/reward-models/{model_id}", status_code=status.HTTP_204_NO_CONTENT, summary="Delete a reward model")
def delete_reward_model(services: Services, settings: Settings, model_id: str, principal: Writer) -> Response:
    """Delete the model with its pairs, checkpoint and learned scores; 409 while it is queued or running (a delete
    never cancels training). GEPA runs against it keep their skills."""
    message = trainer_pb2.DeleteRewardModelRequest(owner_id=principal.user_id, reward_model_id=model_id)
    services.trainer.DeleteRewardModel(message, timeout=settings.rpc_timeout_s)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/reward-models/{model_id}/weights", summary="A five-minute download link of the checkpoint")
def reward_model_weights(services: Services, settings: Settings, model_id: str, principal: Reader) -> dict[str, Any]:
    """`{url, expires_at}`: a signed download of the checkpoint archive; 404 until the model succeeded."""
    message = trainer_pb2.GetWeightsUrlRequest(owner_id=principal.user_id, reward_model_id=model_id)
    response = services.trainer.GetWeightsUrl(message, timeout=settings.rpc_timeout_s)
    return {"url": response.url, "expires_at": timestamp_json(response, "expires_at")}


@router.get("/export/pairs", summary="Training pairs as JSONL", response_class=StreamingResponse)
def export_pairs(
    services: Services, settings: Settings, principal: Reader, reward_model_id: str | None = None
) -> StreamingResponse:
    """`{chosen, rejected, trace_ids, granularity, action_type}` a line: every model's pairs, or one model's."""
    owner_id = principal.user_id
    if reward_model_id is not None:  # a 404 before the download starts
        model = trainer_pb2.GetRewardModelRequest(owner_id=owner_id, reward_model_id=reward_model_id)
        services.trainer.GetRewardModel(model, timeout=settings.rpc_timeout_s)
    message = trainer_pb2.ExportPairsRequest(owner_id=owner_id, reward_model_id=reward_model_id)
    return download(services.trainer.ExportPairs(message, timeout=settings.export_timeout_s), "pairs.jsonl")


def model_json(model: trainer_pb2.RewardModel) -> dict[str, Any]:
    """`RewardModel`, with `quality`: how much its metrics say (each accuracy's count and 95 % interval)."""
    metrics = struct_json(model, "metrics")
    return {
        "id": model.id,
        "name": model.name,
        "base_model": model.base_model,
        "compute": model.compute,
        "epochs": model.epochs,
        "max_pairs": model.max_pairs,
        "trace_count": model.trace_count,
        "status": enum_name(common_pb2.JobStatus, model.status),
        "num_pairs": optional(model, "num_pairs"),
        "metrics": metrics,
        "quality": model_quality(metrics),
        "error": optional(model, "error"),
        "retryable": model.retryable,
        "progress": struct_json(model, "progress") or {},
        "training_config": struct_json(model, "training_config") or {},
        "created_at": timestamp_json(model, "created_at"),
        "started_at": timestamp_json(model, "started_at"),
        "finished_at": timestamp_json(model, "finished_at"),
    }


def feedback_json(finding: trainer_pb2.FeedbackFinding) -> dict[str, Any]:
    """One item of a model's learning report."""
    return {
        "trace_id": finding.trace_id,
        "step_index": finding.step_index,
        "label": enum_name(trainer_pb2.FeedbackLabel, finding.label),
        "confidence": enum_name(trainer_pb2.FeedbackConfidence, finding.confidence),
        "source": enum_name(trainer_pb2.FeedbackSource, finding.source),
        "evidence_id": optional(finding, "evidence_id"),
        "evidence_quote": optional(finding, "evidence_quote"),
        "evidence_author": optional(finding, "evidence_author"),
        "reason": finding.reason,
        "classifier_model": finding.classifier_model,
        "included_in_training": finding.included_in_training,
        "tool_name": optional(finding, "tool_name"),
        "original_action": optional(finding, "original_action"),
        "alternative_action": optional(finding, "alternative_action"),
        "pair_exclusion": optional(finding, "pair_exclusion"),
        "included_in_evaluation": optional(finding, "included_in_evaluation"),
    }
