"""GepaServicer: every owner's GEPA runs over gRPC, and the SKILL.md each succeeded one wrote.

Creating a run checks with the trainer that the reward model is the caller's (NOT_FOUND otherwise)
and succeeded (FAILED_PRECONDITION otherwise), records it queued with the spec's defaults, and
wakes the dispatchers; everything else GEPA does happens in the job (`stash_gepa.dispatcher`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlparse

import grpc
from sqlalchemy.orm import Session, sessionmaker

from stash.rm.v1 import gepa_pb2, gepa_pb2_grpc
from stash_common.db import transaction
from stash_common.errors import InvalidArgument, NotFound
from stash_common.jobs import lifecycle as job_lifecycle
from stash_common.jobs.lifecycle import SUCCEEDED
from stash_common.messages import JOB_STATUSES, timestamp_of
from stash_common.requests import owner_of
from stash_gepa import store
from stash_gepa.dispatcher import Dispatcher, ModelSource, record_progress, record_result, require_succeeded

DEFAULT_TASK_MODEL = "anthropic/claude-haiku-4-5"
DEFAULT_REFLECTION_MODEL = "anthropic/claude-sonnet-5"
DEFAULT_MAX_METRIC_CALLS = 40
MAX_METRIC_CALLS = 10_000
MAX_MODEL_NAME = 500
DEFAULTS_KEY = "ANTHROPIC_API_KEY"  # what both default models (Anthropic's) need in the environment


@dataclass(frozen=True)
class DefaultModels:
    """What this service lacks to run the default task and reflection models (None: nothing is lacking)."""

    task_missing: str | None
    reflection_missing: str | None


def default_models(has_anthropic_key: bool, reflection_api_base: str | None) -> DefaultModels:
    """The defaults' readiness: both need the Anthropic key, unless a reflection API base serves reflection."""
    missing = None if has_anthropic_key else DEFAULTS_KEY
    return DefaultModels(task_missing=missing, reflection_missing=None if reflection_api_base else missing)


class GepaServicer(gepa_pb2_grpc.GepaServiceServicer):
    """GEPA runs that write a SKILL.md against a trained reward model, over gRPC."""

    def __init__(
        self, sessions: sessionmaker[Session], models: ModelSource, dispatcher: Dispatcher, defaults: DefaultModels
    ) -> None:
        self.sessions = sessions
        self.models = models
        self.dispatcher = dispatcher
        self.defaults = defaults

    def CreateGepaRun(
        self, request: gepa_pb2.CreateGepaRunRequest, context: grpc.ServicerContext
    ) -> gepa_pb2.CreateGepaRunResponse:
        """Queue a GEPA run for one of the owner's succeeded reward models."""
        owner_id = owner_of(request)
        row = run_from_request(request, owner_id)
        require_succeeded(self.models.reward_model(owner_id, request.reward_model_id))
        with transaction(self.sessions) as session:
            session.add(row)
            session.flush()
            message = run_to_proto(row)
        self.dispatcher.wake()
        return gepa_pb2.CreateGepaRunResponse(gepa_run=message)

    def ListGepaRuns(
        self, request: gepa_pb2.ListGepaRunsRequest, context: grpc.ServicerContext
    ) -> gepa_pb2.ListGepaRunsResponse:
        """The owner's GEPA runs, newest first."""
        with transaction(self.sessions) as session:
            runs = [run_to_proto(row) for row in store.list_runs(session, owner_of(request))]
        return gepa_pb2.ListGepaRunsResponse(gepa_runs=runs)

    def GetGepaRun(
        self, request: gepa_pb2.GetGepaRunRequest, context: grpc.ServicerContext
    ) -> gepa_pb2.GetGepaRunResponse:
        """One GEPA run."""
        with transaction(self.sessions) as session:
            message = run_to_proto(store.find_run(session, owner_of(request), request.gepa_run_id))
        return gepa_pb2.GetGepaRunResponse(gepa_run=message)

    def GetSkill(self, request: gepa_pb2.GetSkillRequest, context: grpc.ServicerContext) -> gepa_pb2.GetSkillResponse:
        """The best skill of a succeeded run as a rendered SKILL.md; NOT_FOUND until it succeeded."""
        with transaction(self.sessions) as session:
            row = store.find_run(session, owner_of(request), request.gepa_run_id)
            result = row.result if row.status == SUCCEEDED else None
            if result is None:
                raise NotFound(f"GEPA run {row.id} has no skill yet (it is {row.status})")
        return gepa_pb2.GetSkillResponse(skill_md=result["best_skill"], skill_name=result["skill_name"])

    def RetryGepaRun(
        self, request: gepa_pb2.RetryGepaRunRequest, context: grpc.ServicerContext
    ) -> gepa_pb2.RetryGepaRunResponse:
        """Queue a failed run again with the same id and settings."""
        with transaction(self.sessions) as session:
            message = run_to_proto(store.retry(session, owner_of(request), request.gepa_run_id))
        self.dispatcher.wake()
        return gepa_pb2.RetryGepaRunResponse(gepa_run=message)

    def DeleteGepaRun(
        self, request: gepa_pb2.DeleteGepaRunRequest, context: grpc.ServicerContext
    ) -> gepa_pb2.DeleteGepaRunResponse:
        """Delete a run that is not queued or running, with its result (FAILED_PRECONDITION otherwise)."""
        with transaction(self.sessions) as session:
            store.delete_run(session, owner_of(request), request.gepa_run_id)
        return gepa_pb2.DeleteGepaRunResponse()

    def GetGepaDefaults(
        self, request: gepa_pb2.GetGepaDefaultsRequest, context: grpc.ServicerContext
    ) -> gepa_pb2.GetGepaDefaultsResponse:
        """The models of a run that names none, and the setting the service lacks for each."""
        return gepa_pb2.GetGepaDefaultsResponse(
            task_model=DEFAULT_TASK_MODEL,
            reflection_model=DEFAULT_REFLECTION_MODEL,
            task_model_missing=self.defaults.task_missing,
            reflection_model_missing=self.defaults.reflection_missing,
        )

    def ReportGepaProgress(
        self, request: gepa_pb2.ReportGepaProgressRequest, context: grpc.ServicerContext
    ) -> gepa_pb2.ReportGepaProgressResponse:
        """Record a worker's metric calls used on its running run; a superseded launch is refused."""
        if request.metric_calls_used < 0:
            raise InvalidArgument("metric_calls_used", "must be at least 0")
        with transaction(self.sessions) as session:
            record_progress(session, owner_of(request), request.gepa_run_id, request.job_id, request.metric_calls_used)
        return gepa_pb2.ReportGepaProgressResponse()

    def CompleteGepaJob(
        self, request: gepa_pb2.CompleteGepaJobRequest, context: grpc.ServicerContext
    ) -> gepa_pb2.CompleteGepaJobResponse:
        """Settle a worker's run with the result.json it stored: the result, or the error; an invalid one fails it."""
        with transaction(self.sessions) as session:
            row = record_result(
                session, self.dispatcher.objects, owner_of(request), request.gepa_run_id, request.job_id
            )
            message = run_to_proto(row)
        return gepa_pb2.CompleteGepaJobResponse(gepa_run=message)


def run_from_request(request: gepa_pb2.CreateGepaRunRequest, owner_id: str) -> store.GepaRunRow:
    """A queued run with the request's settings and the spec's defaults; bad values are InvalidArgument."""
    if not request.reward_model_id:
        raise InvalidArgument("reward_model_id", "is required")
    task_model = _model_name(request, "task_model", DEFAULT_TASK_MODEL)
    reflection_model = _model_name(request, "reflection_model", DEFAULT_REFLECTION_MODEL)
    budget = request.max_metric_calls if request.HasField("max_metric_calls") else DEFAULT_MAX_METRIC_CALLS
    if not 1 <= budget <= MAX_METRIC_CALLS:
        raise InvalidArgument("max_metric_calls", f"must be between 1 and {MAX_METRIC_CALLS}, got {budget}")
    api_base = request.task_api_base if request.HasField("task_api_base") else None
    if api_base is not None and (urlparse(api_base).scheme not in ("http", "https") or not urlparse(api_base).netloc):
        raise InvalidArgument("task_api_base", f"must be an http(s) URL such as http://vllm:8000/v1, got {api_base!r}")
    return store.GepaRunRow(
        owner_id=owner_id,
        reward_model_id=request.reward_model_id,
        task_model=task_model,
        task_api_base=api_base,
        reflection_model=reflection_model,
        max_metric_calls=budget,
        progress={},
    )


def _model_name(
    request: gepa_pb2.CreateGepaRunRequest, field: Literal["task_model", "reflection_model"], default: str
) -> str:
    if not request.HasField(field):
        return default
    name = str(getattr(request, field)).strip()
    if not name or len(name) > MAX_MODEL_NAME:
        raise InvalidArgument(field, f"must be a LiteLLM model string of 1 to {MAX_MODEL_NAME} characters")
    return name


def run_to_proto(row: store.GepaRunRow) -> gepa_pb2.GepaRun:
    """A run row as its message; the result fields stay unset until it succeeded."""
    result: dict[str, Any] = row.result or {}
    used = (row.progress or {}).get("metric_calls_used")
    return gepa_pb2.GepaRun(
        id=row.id,
        reward_model_id=row.reward_model_id,
        task_model=row.task_model,
        task_api_base=row.task_api_base,
        reflection_model=row.reflection_model,
        max_metric_calls=row.max_metric_calls,
        status=JOB_STATUSES[row.status],
        error=row.error,
        skill_name=result.get("skill_name"),
        skill_description=result.get("skill_description"),
        best_skill=result.get("best_skill"),
        best_score=result.get("best_score"),
        seed_skill=result.get("seed_skill"),
        seed_score=result.get("seed_score"),
        candidates=[
            gepa_pb2.SkillCandidate(skill=item["skill"], score=item["score"]) for item in result.get("candidates", [])
        ],
        example_failures=[
            gepa_pb2.ExampleFailure(trace_id=item["trace_id"], error=item["error"])
            for item in result.get("example_failures", [])
        ],
        created_at=timestamp_of(row.created_at),
        started_at=timestamp_of(row.started_at),
        finished_at=timestamp_of(row.finished_at),
        metric_calls_used=used if isinstance(used, int) else None,
        budget_warning=row.budget_warning,
        train_examples=row.train_examples,
        validation_examples=row.validation_examples,
        retryable=job_lifecycle.retryable(row),
    )
