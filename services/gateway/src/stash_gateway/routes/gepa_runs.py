"""/gepa-runs: GEPA runs that write a SKILL.md for the agent against one of the caller's reward models."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response, status
from pydantic import Field

from stash.rm.v1 import common_pb2, gepa_pb2
from stash_gateway.auth import Reader, Writer
from stash_gateway.openapi import RequestBody
from stash_gateway.rest_json import enum_name, optional, timestamp_json
from stash_gateway.routes import API_PREFIX
from stash_gateway.state import Services, Settings

router = APIRouter(prefix=API_PREFIX, tags=["skills (GEPA)"])


class GepaRunBody(RequestBody):
    """`POST /gepa-runs`: only the reward model is required; the rest has the spec's defaults."""

    reward_model_id: str = Field(min_length=1, description="a succeeded reward model of the caller")
    task_model: str | None = Field(
        None, min_length=1, max_length=500, description="LiteLLM model string; anthropic/claude-haiku-4-5"
    )
    task_api_base: str | None = Field(
        None, description="API base of an OpenAI-compatible server (vLLM, SGLang) for an openai/<name> task model"
    )
    reflection_model: str | None = Field(
        None, min_length=1, max_length=500, description="LiteLLM model string; anthropic/claude-sonnet-5"
    )
    max_metric_calls: int | None = Field(None, ge=1, le=10_000, description="budget of metric calls; 40")


@router.post("/gepa-runs", summary="Write a SKILL.md with GEPA against a reward model")
def create_gepa_run(services: Services, settings: Settings, body: GepaRunBody, principal: Writer) -> dict[str, Any]:
    """`GepaRun` with status `queued`; 404 for a model the caller does not own, 409 unless it succeeded."""
    message = gepa_pb2.CreateGepaRunRequest(owner_id=principal.user_id, **body.model_dump(exclude_none=True))
    return run_json(services.gepa.CreateGepaRun(message, timeout=settings.rpc_timeout_s).gepa_run)


@router.get("/gepa-runs", summary="The caller's GEPA runs, newest first")
def list_gepa_runs(services: Services, settings: Settings, principal: Reader) -> list[dict[str, Any]]:
    """`[GepaRun]`."""
    message = gepa_pb2.ListGepaRunsRequest(owner_id=principal.user_id)
    return [run_json(run) for run in services.gepa.ListGepaRuns(message, timeout=settings.rpc_timeout_s).gepa_runs]


@router.get("/gepa-runs/{run_id}", summary="One GEPA run")
def get_gepa_run(services: Services, settings: Settings, run_id: str, principal: Reader) -> dict[str, Any]:
    """`GepaRun`: `skill_name` and `skill_description` stay null until it succeeded."""
    message = gepa_pb2.GetGepaRunRequest(owner_id=principal.user_id, gepa_run_id=run_id)
    return run_json(services.gepa.GetGepaRun(message, timeout=settings.rpc_timeout_s).gepa_run)


@router.post("/gepa-runs/{run_id}/retry", status_code=status.HTTP_202_ACCEPTED, summary="Retry a failed GEPA run")
def retry_gepa_run(services: Services, settings: Settings, run_id: str, principal: Writer) -> dict[str, Any]:
    """`GepaRun` queued again with the same id and settings; 409 unless it failed."""
    message = gepa_pb2.RetryGepaRunRequest(owner_id=principal.user_id, gepa_run_id=run_id)
    return run_json(services.gepa.RetryGepaRun(message, timeout=settings.rpc_timeout_s).gepa_run)


@router.delete("/gepa-runs/{run_id}", status_code=status.HTTP_204_NO_CONTENT, summary="Delete a GEPA run")
def delete_gepa_run(services: Services, settings: Settings, run_id: str, principal: Writer) -> Response:
    """Delete the run with its result and skill; 409 while it is queued or running (a delete never cancels it)."""
    message = gepa_pb2.DeleteGepaRunRequest(owner_id=principal.user_id, gepa_run_id=run_id)
    services.gepa.DeleteGepaRun(message, timeout=settings.rpc_timeout_s)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/gepa-defaults", summary="The models a GEPA run uses when it names none, and what they lack")
def gepa_defaults(services: Services, settings: Settings, principal: Reader) -> dict[str, Any]:
    """`{task_model, reflection_model, task_model_missing, reflection_model_missing}`: a `*_missing` names the
    setting the gepa service's environment lacks for that default (null when it lacks nothing)."""
    defaults = services.gepa.GetGepaDefaults(gepa_pb2.GetGepaDefaultsRequest(), timeout=settings.rpc_timeout_s)
    return {
        "task_model": defaults.task_model,
        "reflection_model": defaults.reflection_model,
        "task_model_missing": optional(defaults, "task_model_missing"),
        "reflection_model_missing": optional(defaults, "reflection_model_missing"),
    }


@router.get("/gepa-runs/{run_id}/skill", summary="Download the best skill as SKILL.md")
def get_skill(services: Services, settings: Settings, run_id: str, principal: Reader) -> Response:
    """The best skill as a `text/markdown` attachment `SKILL.md`; 404 until the run succeeded."""
    message = gepa_pb2.GetSkillRequest(owner_id=principal.user_id, gepa_run_id=run_id)
    skill = services.gepa.GetSkill(message, timeout=settings.rpc_timeout_s)
    headers = {"Content-Disposition": 'attachment; filename="SKILL.md"'}
    return Response(skill.skill_md, media_type="text/markdown; charset=utf-8", headers=headers)


def run_json(run: gepa_pb2.GepaRun) -> dict[str, Any]:
    """`GepaRun`: its settings, lifecycle, progress (metric calls used) and, once succeeded, the result."""
    return {
        "id": run.id,
        "reward_model_id": run.reward_model_id,
        "task_model": run.task_model,
        "task_api_base": optional(run, "task_api_base"),
        "reflection_model": run.reflection_model,
        "max_metric_calls": run.max_metric_calls,
        "status": enum_name(common_pb2.JobStatus, run.status),
        "error": optional(run, "error"),
        "retryable": run.retryable,
        "progress": optional(run, "metric_calls_used"),
        "budget_warning": optional(run, "budget_warning"),
        "train_examples": optional(run, "train_examples"),
        "validation_examples": optional(run, "validation_examples"),
        "skill_name": optional(run, "skill_name"),
        "skill_description": optional(run, "skill_description"),
        "best_skill": optional(run, "best_skill"),
        "best_score": optional(run, "best_score"),
        "seed_skill": optional(run, "seed_skill"),
        "seed_score": optional(run, "seed_score"),
        "candidates": [{"skill": candidate.skill, "score": candidate.score} for candidate in run.candidates],
        "example_failures": [{"trace_id": item.trace_id, "error": item.error} for item in run.example_failures],
        "created_at": timestamp_json(run, "created_at"),
        "started_at": timestamp_json(run, "started_at"),
        "finished_at": timestamp_json(run, "finished_at"),
    }
