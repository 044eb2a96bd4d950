"""Trace sections: the deterministic tasks → subtasks → steps tree, section summaries and completion estimates.

All three come from the labeler, asked for the trace's owner once ingest has said the caller owns or reviews the
trace (`stash_gateway.access`): that check comes before any cached read or model call. Summaries and completion
are the fast model's cached estimates, `pending` while another request generates them and `unavailable` (with the
reason) when they failed or no model is configured.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import Field

from stash.rm.v1 import labeler_pb2
from stash_gateway.access import trace_access
from stash_gateway.auth import Reader
from stash_gateway.openapi import RequestBody
from stash_gateway.routes import API_PREFIX
from stash_gateway.state import Services, Settings

router = APIRouter(prefix=API_PREFIX, tags=["sections"])


class StepRangeBody(RequestBody):
    """One section's span: its first and last step ids, inclusive."""

    first_step_id: str = Field(min_length=1, max_length=200)
    last_step_id: str = Field(min_length=1, max_length=200)


class SectionSummariesBody(RequestBody):
    """`{ranges: [{first_step_id, last_step_id}]}`: 1 to 4 ranges of the trace's steps."""

    ranges: list[StepRangeBody] = Field(min_length=1, max_length=4)


@router.get("/traces/{trace_id}/sections", summary="The trace's tasks, subtasks and steps")
def trace_sections(services: Services, settings: Settings, trace_id: str, principal: Reader) -> dict[str, Any]:
    """`{revision, tasks: [Section]}`, grouped from the current revision; 404 for a trace the caller neither owns
    nor reviews."""
    owner_id = trace_access(services, settings, principal, trace_id).trace_owner_id
    message = labeler_pb2.GetTraceSectionsRequest(owner_id=owner_id, trace_id=trace_id)
    response = services.labeler.GetTraceSections(message, timeout=settings.rpc_timeout_s)
    return {"revision": response.revision, "tasks": [section_json(task) for task in response.tasks]}


def section_json(section: labeler_pb2.TraceSection) -> dict[str, Any]:
    """`{kind, title, title_source, first_step_id, last_step_id, step_ids, graded, activity, children}`."""
    return {
        "kind": section.kind,
        "title": section.title,
        "title_source": section.title_source,
        "first_step_id": section.step_ids[0],
        "last_step_id": section.step_ids[-1],
        "step_ids": list(section.step_ids),
        "graded": section.graded,
        "activity": section.activity if section.HasField("activity") else None,
        "children": [section_json(child) for child in section.children],
    }


@router.post("/traces/{trace_id}/section-summaries", summary="Titles, summaries and scores of 1 to 4 sections")
def section_summaries(
    services: Services, settings: Settings, trace_id: str, body: SectionSummariesBody, principal: Reader
) -> dict[str, Any]:
    """`{summaries: [{first_step_id, last_step_id, title, summary, objective, score, reason, pending, unavailable,
    unavailable_reason}]}` in request order; 404 for a trace the caller neither owns nor reviews, 422 for a range
    not in it."""
    ranges = [labeler_pb2.SectionRange(first_step_id=r.first_step_id, last_step_id=r.last_step_id) for r in body.ranges]
    owner_id = trace_access(services, settings, principal, trace_id).trace_owner_id
    message = labeler_pb2.SummarizeSectionsRequest(owner_id=owner_id, trace_id=trace_id, ranges=ranges)
    response = services.labeler.SummarizeSections(message, timeout=settings.rpc_timeout_s)
    return {"summaries": [_summary_json(summary) for summary in response.summaries]}


@router.post("/traces/{trace_id}/completion", summary="Estimated progress toward each independent request")
def trace_completion(services: Services, settings: Settings, trace_id: str, principal: Reader) -> dict[str, Any]:
    """`{tasks: [{first_step_id, last_step_id, objective, checkpoints: [{step_id, completion, reason}]}], pending,
    unavailable, reason}`; 404 for a trace the caller neither owns nor reviews."""
    owner_id = trace_access(services, settings, principal, trace_id).trace_owner_id
    message = labeler_pb2.GetTraceCompletionRequest(owner_id=owner_id, trace_id=trace_id)
    response = services.labeler.GetTraceCompletion(message, timeout=settings.rpc_timeout_s)
    return {
        "tasks": [_completion_task_json(task) for task in response.tasks],
        "pending": response.pending,
        "unavailable": response.unavailable,
        "reason": response.reason or None,
    }


def _summary_json(summary: labeler_pb2.SectionSummary) -> dict[str, Any]:
    ready = not (summary.pending or summary.unavailable)
    return {
        "first_step_id": summary.first_step_id,
        "last_step_id": summary.last_step_id,
        "title": summary.title if ready else None,
        "summary": summary.summary if ready else None,
        "objective": summary.objective if ready else None,
        "score": summary.score if summary.HasField("score") else None,
        "reason": summary.reason if ready else None,
        "pending": summary.pending,
        "unavailable": summary.unavailable,
        "unavailable_reason": summary.unavailable_reason or None,
    }


def _completion_task_json(task: labeler_pb2.CompletionTask) -> dict[str, Any]:
    return {
        "first_step_id": task.first_step_id,
        "last_step_id": task.last_step_id,
        "objective": task.objective,
        "checkpoints": [
            {
                "step_id": point.step_id,
                "completion": point.completion if point.HasField("completion") else None,
                "reason": point.reason,
            }
            for point in task.checkpoints
        ],
    }
