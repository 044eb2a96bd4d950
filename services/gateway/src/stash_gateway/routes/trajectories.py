"""/trajectories: live agents send their tool calls and get course corrections from the trajectory PRM."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path
from pydantic import AwareDatetime, Field

from stash.rm.v1 import labeler_pb2
from stash_common.messages import timestamp_of
from stash_gateway.auth import Reader, Writer
from stash_gateway.evaluations import pattern_json
from stash_gateway.openapi import ClosedBody, RequestBody
from stash_gateway.rest_json import timestamp_json
from stash_gateway.routes import API_PREFIX
from stash_gateway.state import Services, Settings

router = APIRouter(prefix=API_PREFIX, tags=["trajectories"])
TaskId = Annotated[str, Path(min_length=1, max_length=200, description="the agent's task id (OTLP: the trace id)")]


class TrajectoryEventBody(ClosedBody):
    """One action of the agent: who did what to which files, whether it worked and how long it took."""

    timestamp: AwareDatetime | None = Field(None, description="when the action started; default: when received")
    role: str = Field("agent", max_length=200, description="the agent or subagent that acted")
    action: str = Field(min_length=1, max_length=200, description="tool name or verb: edit, read, test, run, search")
    target_files: list[str] = Field(default_factory=list, max_length=1000, description="paths the action targeted")
    success: bool = Field(True, description="whether the action succeeded")
    duration_s: float = Field(0.0, ge=0, allow_inf_nan=False, description="seconds the action took; 0 if untimed")


class TrajectoryEventsBody(RequestBody):
    """`{events: [...]}`: one or more events in chronological order."""

    events: list[TrajectoryEventBody] = Field(min_length=1, max_length=500)


@router.post("/trajectories/{task_id}/events", summary="Record a live task's events; get a course correction")
def record_events(
    services: Services, settings: Settings, task_id: TaskId, body: TrajectoryEventsBody, principal: Writer
) -> dict[str, Any]:
    """`{course_correction, patterns}`: the correction to splice into the agent's next prompt, or null."""
    message = labeler_pb2.RecordTrajectoryEventsRequest(
        owner_id=principal.user_id, task_id=task_id, events=[_event(event) for event in body.events]
    )
    response = services.labeler.RecordTrajectoryEvents(message, timeout=settings.rpc_timeout_s)
    return {
        "course_correction": correction_json(response.course_correction)
        if response.HasField("course_correction")
        else None,
        "patterns": [pattern_json(pattern) for pattern in response.patterns],
    }


@router.get("/trajectories/{task_id}/course-correction", summary="The latest course correction of a task")
def course_correction(services: Services, settings: Settings, task_id: TaskId, principal: Reader) -> dict[str, Any]:
    """`{course_correction}`: the newest correction emitted for the task, or null."""
    message = labeler_pb2.GetCourseCorrectionRequest(owner_id=principal.user_id, task_id=task_id)
    response = services.labeler.GetCourseCorrection(message, timeout=settings.rpc_timeout_s)
    found = response.HasField("course_correction")
    return {"course_correction": correction_json(response.course_correction) if found else None}


def correction_json(correction: labeler_pb2.CourseCorrection) -> dict[str, Any]:
    """`CourseCorrection` with its Markdown `prompt_block`."""
    return {
        "task_id": correction.task_id,
        "taxonomy": correction.taxonomy,
        "pattern": correction.pattern,
        "suggestion": correction.suggestion,
        "prompt_block": correction.prompt_block,
        "fingerprint": correction.fingerprint,
        "created_at": timestamp_json(correction, "created_at"),
    }


def _event(event: TrajectoryEventBody) -> labeler_pb2.TrajectoryEvent:
    return labeler_pb2.TrajectoryEvent(
        timestamp=timestamp_of(event.timestamp),
        role=event.role,
        action=event.action,
        target_files=event.target_files,
        success=event.success,
        duration_s=event.duration_s,
    )
