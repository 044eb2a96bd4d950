"""TrainerServicer: proto ⇄ domain for the TrainerService; errors become statuses in the interceptor.

Every method takes and returns the generated `trainer_pb2` types. The servicer reads traces only
through `TraceClient` and hands models to the `Dispatcher`; a remote worker's completion is held to
the same training metric keys as a local job's `result.json`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import timedelta
from typing import Any

import grpc
import orjson
import structlog
from sqlalchemy.orm import Session, sessionmaker

from stash.rm.v1 import common_pb2, trainer_pb2, trainer_pb2_grpc
from stash_common.db import transaction, utc_now
from stash_common.errors import InvalidArgument, NotFound
from stash_common.jobs import lifecycle as job_lifecycle
from stash_common.messages import JOB_STATUSES, json_of, struct_of, timestamp_of
from stash_common.requests import owner_of
from stash_common.storage import ObjectStore
from stash_common.training_metrics import check_training_metrics
from stash_trainer import store
from stash_trainer.clients import ScoreClient, TraceClient
from stash_trainer.dispatcher import Dispatcher, archive_key
from stash_trainer.pairs.automatic import recorded_training_config
from stash_trainer.pairs.dataset import DEFAULT_MAX_PAIRS, MIN_PAIRS, MIN_TRACES
from stash_trainer.pairs.preference import export_line, unmarked

log = structlog.get_logger()
WEIGHTS_URL_TTL = timedelta(minutes=5)
MAX_TRACES = 10_000
MAX_EPOCHS = 50
MAX_PAIRS_LIMIT = 100_000
EXPORT_CHUNK_BYTES = 1 << 20
_LABELS = {
    "positive": trainer_pb2.FEEDBACK_LABEL_POSITIVE,
    "negative": trainer_pb2.FEEDBACK_LABEL_NEGATIVE,
    "unclear": trainer_pb2.FEEDBACK_LABEL_UNCLEAR,
}
_CONFIDENCES = {"high": trainer_pb2.FEEDBACK_CONFIDENCE_HIGH, "low": trainer_pb2.FEEDBACK_CONFIDENCE_LOW}
_SOURCES = {
    "user_feedback": trainer_pb2.FEEDBACK_SOURCE_USER_FEEDBACK,
    "ai_judgment": trainer_pb2.FEEDBACK_SOURCE_AI_JUDGMENT,
}


class TrainerServicer(trainer_pb2_grpc.TrainerServiceServicer):
    """Every owner's reward models, over gRPC."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        traces: TraceClient,
        scores: ScoreClient,
        objects: ObjectStore,
        dispatcher: Dispatcher,
        default_base_model: str,
        compute: str,
    ) -> None:
        self.sessions = sessions
        self.traces = traces
        self.scores = scores
        self.objects = objects
        self.dispatcher = dispatcher
        self.default_base_model = default_base_model
        self.compute = compute

    def CreateRewardModel(
        self, request: trainer_pb2.CreateRewardModelRequest, context: grpc.ServicerContext
    ) -> trainer_pb2.CreateRewardModelResponse:
        """Record a queued model for the owner's selected traces and wake the dispatchers."""
        row = model_from_request(request, owner_of(request), self.default_base_model, self.compute)
        missing = self.traces.first_unowned(row.owner_id, row.trace_ids)
        if missing is not None:
            raise NotFound(f"trace {missing} not found")
        with transaction(self.sessions) as session:
            session.add(row)
            session.flush()
            message = model_to_proto(row)
        self.dispatcher.wake()
        return trainer_pb2.CreateRewardModelResponse(reward_model=message)

    def ListRewardModels(
        self, request: trainer_pb2.ListRewardModelsRequest, context: grpc.ServicerContext
    ) -> trainer_pb2.ListRewardModelsResponse:
        """The owner's models, newest first; with `trace_id`, only those trained on that trace."""
        trace_id = request.trace_id if request.HasField("trace_id") else None
        with transaction(self.sessions) as session:
            rows = store.list_models(session, owner_of(request))
            models = [model_to_proto(row) for row in rows if trace_id is None or trace_id in row.trace_ids]
        return trainer_pb2.ListRewardModelsResponse(reward_models=models)

    def GetRewardModel(
        self, request: trainer_pb2.GetRewardModelRequest, context: grpc.ServicerContext
    ) -> trainer_pb2.GetRewardModelResponse:
        """One model with its trace ids and feedback report."""
        with transaction(self.sessions) as session:
            row = store.find_model(session, owner_of(request), request.reward_model_id)
            detail = trainer_pb2.RewardModelDetail(reward_model=model_to_proto(row), trace_ids=list(row.trace_ids))
            if row.feedback is not None:
                detail.feedback.CopyFrom(trainer_pb2.FeedbackReport(findings=[_finding(item) for item in row.feedback]))
                detail.feedback_from_earlier_attempt = store.feedback_from_earlier_attempt(row)
        return trainer_pb2.GetRewardModelResponse(reward_model=detail)

    def RetryRewardModel(
        self, request: trainer_pb2.RetryRewardModelRequest, context: grpc.ServicerContext
    ) -> trainer_pb2.RetryRewardModelResponse:
        """Queue a failed model again with the same id and traces."""
        with transaction(self.sessions) as session:
            row = store.retry(session, owner_of(request), request.reward_model_id)
            message = model_to_proto(row)
        self.dispatcher.wake()
        return trainer_pb2.RetryRewardModelResponse(reward_model=message)

    def DeleteRewardModel(
        self, request: trainer_pb2.DeleteRewardModelRequest, context: grpc.ServicerContext
    ) -> trainer_pb2.DeleteRewardModelResponse:
        """Delete a model that is not training: its learned scores (the scorer), its checkpoint, then its row and
        pairs, so a failure part way leaves the model listed and the delete can be repeated. A model that is
        queued or running is refused (FAILED_PRECONDITION), not cancelled."""
        owner_id, model_id = owner_of(request), request.reward_model_id
        with transaction(self.sessions) as session:
            artifact_key = store.deletable_model(session, owner_id, model_id).artifact_key
        self.scores.forget_reward_model(owner_id, model_id)
        if artifact_key is not None:
            self.objects.delete(artifact_key)
        with transaction(self.sessions) as session:
            store.delete_model(session, owner_id, model_id)
        log.info("reward model deleted", reward_model_id=model_id)
        return trainer_pb2.DeleteRewardModelResponse()

    def GetWeightsUrl(
        self, request: trainer_pb2.GetWeightsUrlRequest, context: grpc.ServicerContext
    ) -> trainer_pb2.GetWeightsUrlResponse:
        """A five-minute signed download of the checkpoint archive; not found until the model succeeded."""
        with transaction(self.sessions) as session:
            row = store.find_model(session, owner_of(request), request.reward_model_id)
            key = row.artifact_key if row.status == store.SUCCEEDED else None
        if key is None:
            raise NotFound(f"reward model {request.reward_model_id} has no weights yet (it is {row.status})")
        expires_at = utc_now() + WEIGHTS_URL_TTL
        url = self.objects.presign(key, int(WEIGHTS_URL_TTL.total_seconds()))
        return trainer_pb2.GetWeightsUrlResponse(url=url, expires_at=timestamp_of(expires_at))

    def ExportPairs(
        self, request: trainer_pb2.ExportPairsRequest, context: grpc.ServicerContext
    ) -> Iterator[trainer_pb2.ExportPairsResponse]:
        """The owner's recorded training pairs as JSONL (`{chosen, rejected, trace_ids, granularity, action_type}`).

        With `with_evidence`, each line is the recorded `pairs.jsonl` line: those fields, then the evidence.
        """
        owner_id = owner_of(request)
        model_id = request.reward_model_id if request.HasField("reward_model_id") else None
        with transaction(self.sessions) as session:
            if model_id is not None:
                store.find_model(session, owner_id, model_id)
            rows = store.exported_pairs(session, owner_id, model_id)
            pairs = [unmarked(row.pair) if request.with_evidence else export_line(row.pair) for row in rows]
            lines = [orjson.dumps(pair) + b"\n" for pair in pairs]
        chunk = b""
        for line in lines:
            chunk += line
            if len(chunk) >= EXPORT_CHUNK_BYTES:
                yield trainer_pb2.ExportPairsResponse(data=chunk)
                chunk = b""
        if chunk:
            yield trainer_pb2.ExportPairsResponse(data=chunk)

    def ReportJobProgress(
        self, request: trainer_pb2.ReportJobProgressRequest, context: grpc.ServicerContext
    ) -> trainer_pb2.ReportJobProgressResponse:
        """Merge a remote worker's progress into its running model; a superseded launch is refused."""
        with transaction(self.sessions) as session:
            row = _reporting_job(session, request)
            row.progress = {**row.progress, **json_of(request.progress)}
        return trainer_pb2.ReportJobProgressResponse()

    def CompleteJob(
        self, request: trainer_pb2.CompleteJobRequest, context: grpc.ServicerContext
    ) -> trainer_pb2.CompleteJobResponse:
        """Record how a worker's job ended (metrics and checkpoint, or the error); a repeated report changes nothing.

        The job's scores stay in object storage: once the worker has ended, the dispatcher tells the scorer
        their key (`Dispatcher.job_ended`).
        """
        succeeded = request.status == common_pb2.JOB_STATUS_SUCCEEDED
        if succeeded:
            self._check_success(request)
        elif request.status != common_pb2.JOB_STATUS_FAILED:
            raise InvalidArgument("status", "must be JOB_STATUS_SUCCEEDED or JOB_STATUS_FAILED")
        with transaction(self.sessions) as session:
            model = store.find_model(session, owner_of(request), request.reward_model_id)
            row = store.completing_job(session, request.reward_model_id, request.job_id)
            if row is not None and succeeded:
                row.metrics, row.artifact_key = json_of(request.metrics), request.artifact_key
                row.progress = {**row.progress, "stage": "done"}
                store.finish(row, store.SUCCEEDED)
            elif row is not None:
                row.progress = {**row.progress, "stage": "failed"}
                store.finish(row, store.FAILED, request.error or "the training job failed")
            return trainer_pb2.CompleteJobResponse(reward_model=model_to_proto(model))

    def _check_success(self, request: trainer_pb2.CompleteJobRequest) -> None:
        """A success reports the shared metric keys and the model's own checkpoint archive, already stored."""
        if not request.HasField("artifact_key") or not request.HasField("metrics"):
            raise InvalidArgument("artifact_key", "a succeeded job reports its metrics and checkpoint key")
        check_training_metrics(json_of(request.metrics))
        expected = archive_key(owner_of(request), request.reward_model_id)
        if request.artifact_key != expected:
            raise InvalidArgument("artifact_key", f"must be {expected}, this model's checkpoint archive")
        if not self.objects.exists(expected):
            raise InvalidArgument("artifact_key", f"no checkpoint archive is stored at {expected}: upload it first")


def model_from_request(
    request: trainer_pb2.CreateRewardModelRequest, owner_id: str, default_base_model: str, compute: str
) -> store.RewardModelRow:
    """The queued model a create request asks for, every field checked (the traces' owner is checked apart)."""
    name = request.name.strip()
    if not 1 <= len(name) <= 200:
        raise InvalidArgument("name", "must be 1 to 200 characters")
    trace_ids = _selected_traces(request.trace_ids)
    epochs = _bounded("epochs", request.epochs if request.HasField("epochs") else 1, 1, MAX_EPOCHS)
    max_pairs = request.max_pairs if request.HasField("max_pairs") else DEFAULT_MAX_PAIRS
    _bounded("max_pairs", max_pairs, MIN_PAIRS, MAX_PAIRS_LIMIT)
    config = recorded_training_config(json_of(request.training_config) if request.HasField("training_config") else None)
    base_model = request.base_model.strip() if request.HasField("base_model") else default_base_model
    if not base_model:
        raise InvalidArgument("base_model", "must name a model (a local path, a hub id or the packaged model)")
    return store.RewardModelRow(
        owner_id=owner_id,
        name=name,
        base_model=base_model,
        compute=compute,
        epochs=epochs,
        max_pairs=max_pairs,
        training_config=config,
        trace_ids=trace_ids,
        progress={},
        created_at=utc_now(),
    )


def _selected_traces(trace_ids: Sequence[str]) -> list[str]:
    """The distinct selected traces: at least two, since evaluation holds out whole traces."""
    distinct = list(dict.fromkeys(trace_ids))
    if not MIN_TRACES <= len(distinct) <= MAX_TRACES:
        reason = "evaluation holds out whole traces, so training needs at least two"
        raise InvalidArgument("trace_ids", f"select {MIN_TRACES} to {MAX_TRACES} traces, not {len(distinct)}: {reason}")
    return distinct


def _bounded(field: str, value: int, low: int, high: int) -> int:
    if not low <= value <= high:
        raise InvalidArgument(field, f"must be {low} to {high}")
    return value


def _reporting_job(session: Session, request: trainer_pb2.ReportJobProgressRequest) -> store.RewardModelRow:
    """The running model a remote worker reports on; another owner's model is not found, before its state is told."""
    store.find_model(session, owner_of(request), request.reward_model_id)
    return store.running_job(session, request.reward_model_id, request.job_id)


def model_to_proto(row: store.RewardModelRow) -> trainer_pb2.RewardModel:
    """A reward model row as its message."""
    return trainer_pb2.RewardModel(
        id=row.id,
        name=row.name,
        base_model=row.base_model,
        compute=row.compute,
        epochs=row.epochs,
        max_pairs=row.max_pairs,
        trace_count=len(row.trace_ids),
        status=JOB_STATUSES[row.status],
        num_pairs=row.num_pairs,
        metrics=struct_of(row.metrics),
        error=row.error,
        created_at=timestamp_of(row.created_at),
        started_at=timestamp_of(row.started_at),
        finished_at=timestamp_of(row.finished_at),
        training_config=struct_of(row.training_config or {}),
        progress=struct_of({key: value for key, value in (row.progress or {}).items() if key != "job_dir"}),
        artifact_key=row.artifact_key,
        retryable=job_lifecycle.retryable(row),
    )


def _finding(item: Mapping[str, Any]) -> trainer_pb2.FeedbackFinding:
    return trainer_pb2.FeedbackFinding(
        trace_id=item["trace_id"],
        step_index=item["step_index"],
        label=_LABELS.get(item.get("label") or "", trainer_pb2.FEEDBACK_LABEL_UNSPECIFIED),
        confidence=_CONFIDENCES.get(item.get("confidence") or "", trainer_pb2.FEEDBACK_CONFIDENCE_UNSPECIFIED),
        source=_SOURCES.get(item.get("source") or "", trainer_pb2.FEEDBACK_SOURCE_UNSPECIFIED),
        evidence_id=item.get("evidence_id"),
        evidence_quote=item.get("evidence_quote"),
        evidence_author=item.get("evidence_author"),
        reason=item.get("reason") or "",
        classifier_model=item.get("classifier_model") or "",
        included_in_training=bool(item.get("included_in_training")),
        tool_name=item.get("tool_name"),
        original_action=item.get("original_action"),
        alternative_action=item.get("alternative_action"),
        pair_exclusion=item.get("pair_exclusion") or None,
        included_in_evaluation=item.get("included_in_evaluation"),
    )
