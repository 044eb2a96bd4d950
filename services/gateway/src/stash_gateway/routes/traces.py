"""/formats and /traces: import, list, read, score and delete traces."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime, timedelta
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import orjson
from fastapi import APIRouter, Depends, Query, Request, Response, status
from google.protobuf import timestamp_pb2
from pydantic import Field, ValidationError
from starlette.concurrency import run_in_threadpool

from stash.rm.v1 import common_pb2, ingest_pb2, labeler_pb2, scorer_pb2, trainer_pb2
from stash_common.errors import InvalidArgument, ResourceExhausted
from stash_common.messages import timestamp_of
from stash_gateway.access import require_owner
from stash_gateway.accounts import Principal
from stash_gateway.auth import Reader, Writer
from stash_gateway.evaluations import (
    merge_evaluation,
    pattern_names,
    summaries,
    trace_evaluations,
    traces_with_pattern,
)
from stash_gateway.openapi import RequestBody
from stash_gateway.peers import tolerating_outage
from stash_gateway.rate_limits import ImportWriter
from stash_gateway.rest_json import enum_name, summary_json, trace_detail_json
from stash_gateway.routes import API_PREFIX
from stash_gateway.routes.paging import Page
from stash_gateway.scores import (
    latest_scores,
    scoring_run_json,
    shared_evaluator_json,
    shared_trace_scores,
    trace_scores,
)
from stash_gateway.state import Services, Settings

router = APIRouter(prefix=API_PREFIX, tags=["traces"])
STEP_INDEX_MAX = 2**31 - 1  # GetTraceRequest's steps_offset and steps_limit are int32
# `?sort=` of the list: newest import first (the default), or by source display name A–Z / Z–A.
TRACE_ORDERS = {
    "imported": ingest_pb2.TRACE_ORDER_UNSPECIFIED,
    "source": ingest_pb2.TRACE_ORDER_SOURCE_ASCENDING,
    "-source": ingest_pb2.TRACE_ORDER_SOURCE_DESCENDING,
}
TraceSort = Literal["imported", "source", "-source"]
NO_SCORES: dict[str, list[Any]] = {"scores": [], "action_scores": [], "scoring_runs": []}
# A reviewer sees no scores of the owner's traces, the shared evaluator's included.
REVIEWER_SHARED = {
    **shared_evaluator_json(None, ()),
    "reason": "the shared evaluator's scores are shown to the trace's owner",
}


class ImportBody(RequestBody):
    """`{format, data, source_id?}`: a payload in one format (or `auto`) as text."""

    format: str = Field("auto", description="a format name from GET /formats, or auto")
    data: str = Field(description="the payload: JSONL or JSON text")
    source_id: str | None = Field(None, min_length=1, max_length=200, description="overrides recorded source ids")


class ScoreBody(RequestBody):
    """`{reward_model_id}`: the reward model to score a trace's actions with."""

    reward_model_id: str = Field(min_length=1, description="a succeeded model of the caller trained on actions")


async def limited_body(request: Request, settings: Settings) -> bytes:
    """The request body, refused with 413 as soon as it exceeds the configured limit."""
    limit = settings.max_body_bytes
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise ResourceExhausted(f"request body of {declared} bytes exceeds the {limit}-byte limit")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ResourceExhausted(f"request body exceeds the {limit}-byte limit")
        chunks.append(chunk)
    return b"".join(chunks)


@router.get("/formats", summary="The importable trace formats")
def list_formats(services: Services, settings: Settings, principal: Reader) -> list[dict[str, str]]:
    """`[{name, description}]` for every format `POST /traces/import` accepts (plus `auto`)."""
    response = services.ingest.ListFormats(ingest_pb2.ListFormatsRequest(), timeout=settings.rpc_timeout_s)
    return [{"name": item.name, "description": item.description} for item in response.formats]


@router.post(
    "/traces/import",
    summary="Import traces (all or nothing)",
    openapi_extra={
        "requestBody": {"content": {"application/json": {"schema": ImportBody.model_json_schema()}}, "required": True}
    },
)
async def import_traces(
    services: Services, settings: Settings, principal: ImportWriter, body: Annotated[bytes, Depends(limited_body)]
) -> dict[str, Any]:
    """Import every trace of the payload, or none: one bad trace fails the request with 422 naming it."""
    try:
        # orjson unescapes the payload string in half pydantic's time (0.08 s against 0.16 for 44 MB).
        parsed = ImportBody.model_validate(orjson.loads(body))
    except orjson.JSONDecodeError as error:
        raise InvalidArgument("body", f"is not valid JSON ({error})") from None
    except ValidationError as error:
        first = error.errors()[0]
        raise InvalidArgument(".".join(str(part) for part in first["loc"]) or "body", first["msg"]) from None
    message = ingest_pb2.ImportTracesRequest(
        owner_id=principal.user_id, format=parsed.format, data=parsed.data.encode(), source_id=parsed.source_id
    )
    response = await run_in_threadpool(services.ingest.ImportTraces, message, timeout=settings.import_timeout_s)
    return {"format": response.format, "imported": response.imported, "trace_ids": list(response.trace_ids)}


@router.get("/traces", summary="The caller's traces, newest import first")
def list_traces(
    services: Services,
    settings: Settings,
    principal: Reader,
    page: Page,
    source_id: str | None = None,
    imported_from: Annotated[date | None, Query(description="first import date, inclusive")] = None,
    imported_to: Annotated[date | None, Query(description="last import date, inclusive")] = None,
    tz: Annotated[str, Query(description="IANA time zone of the import dates")] = "UTC",
    pattern: Annotated[str | None, Query(description="only traces with this process pattern")] = None,
    sort: Annotated[
        TraceSort, Query(description="imported: newest import first; source / -source: by source name A–Z / Z–A")
    ] = "imported",
) -> dict[str, Any]:
    """`{traces: [TraceSummary], total}` with `evaluation`, `latest_score`, `shared_evaluator` (the shared
    evaluator's release and trace score, null when none scored it) and `process_patterns` (names).

    Import dates are local days in `tz`; `process_patterns` is null while the labeler is out of reach."""
    after, before = import_window(imported_from, imported_to, tz)
    message = ingest_pb2.ListTracesRequest(
        owner_id=principal.user_id,
        page=page,
        source_id=source_id,
        created_after=after,
        created_before=before,
        order=TRACE_ORDERS[sort],
    )
    return trace_page(services, settings, principal, message, [principal.user_id], pattern)


def trace_page(
    services: Services,
    settings: Settings,
    principal: Principal,
    message: ingest_pb2.ListTracesRequest,
    owner_ids: Sequence[str],
    pattern: str | None,
) -> dict[str, Any]:
    """One page of a trace list (the caller's own, or shared with them by `owner_ids`) with each trace's evaluation
    and process patterns from its owner's labels, and `latest_score` only from the caller's own models."""
    labeler, timeout_s = services.labeler, settings.evaluation_timeout_s
    if pattern:
        matched = [
            found for owner_id in owner_ids for found in traces_with_pattern(labeler, owner_id, pattern, timeout_s)
        ]
        if not matched:
            return {"traces": [], "total": 0}
        message.trace_ids.extend(matched)
    response = services.ingest.ListTraces(message, timeout=settings.rpc_timeout_s)
    by_owner: dict[str, list[str]] = {}
    for item in response.traces:
        by_owner.setdefault(item.source_owner_id, []).append(item.id)
    scores: dict[str, Any] = {}
    patterns: dict[str, Any] = {}
    for owner_id, listed in by_owner.items():
        scores |= summaries(labeler, owner_id, listed, timeout_s)
        patterns |= pattern_names(labeler, owner_id, listed, timeout_s)
    own = by_owner.get(principal.user_id, [])
    learned = latest_scores(services.scorer, principal.user_id, own, settings.score_timeout_s)
    shared = shared_trace_scores(services.scorer, principal.user_id, own, settings.score_timeout_s)
    traces = [
        {
            **summary_json(item),
            "evaluation": scores.get(item.id),
            "latest_score": learned.get(item.id),
            "shared_evaluator": shared.get(item.id),
            "process_patterns": patterns.get(item.id),
        }
        for item in response.traces
    ]
    return {"traces": traces, "total": response.page_info.total}


def import_window(
    first: date | None, last: date | None, tz: str
) -> tuple[timestamp_pb2.Timestamp | None, timestamp_pb2.Timestamp | None]:
    """The inclusive local import dates of a list's filter as the timestamps ListTraces takes."""
    try:
        zone = ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a name too long for a file name
        raise InvalidArgument("tz", f"unknown time zone {tz!r}; use an IANA name such as Europe/Berlin") from None
    after = timestamp_of(datetime.combine(first, datetime.min.time(), zone)) if first else None
    before = timestamp_of(datetime.combine(last + timedelta(days=1), datetime.min.time(), zone)) if last else None
    return after, before


@router.get("/traces/{trace_id}", summary="One trace with steps, spans, annotations and scores")
def get_trace(
    services: Services,
    settings: Settings,
    trace_id: str,
    principal: Reader,
    steps_offset: Annotated[int, Query(ge=0, le=STEP_INDEX_MAX, description="first step returned")] = 0,
    steps_limit: Annotated[
        int | None, Query(ge=1, le=STEP_INDEX_MAX, description="most steps returned; unset: all from the offset")
    ] = None,
) -> dict[str, Any]:
    """`TraceDetail` with the automatic evaluation and the learned scores merged in; 404 for a trace the caller
    neither owns nor reviews.

    `steps_offset` and `steps_limit` page the steps of a long trace (`step_count` is the whole trace's; each step
    keeps its `index`); spans, annotations, the evaluation, trace scores and scoring runs are always the whole
    trace's, `action_scores` those of the returned steps (never of a step a re-import removed). A reviewer sees the
    owner's source names and evaluation, but no scores: those come from the owner's reward models, which are
    never shown to anyone else (`reviewing` is true). `trained_models` are the caller's own reward models whose
    selected traces include this one (`id` and `name`, newest first, whatever their status): never another
    user's, so a reviewer sees only models of their own. `shared_evaluator` is the shared evaluator's release that
    scored the trace, with its trace score and each returned action's credit, or `release` null and a `reason`."""
    message = ingest_pb2.GetTraceRequest(
        owner_id=principal.user_id, trace_id=trace_id, steps_offset=steps_offset, steps_limit=steps_limit
    )
    detail = trace_detail_json(services.ingest.GetTrace(message, timeout=settings.rpc_timeout_s))
    owner_id = detail["source_owner_id"]
    evaluations = trace_evaluations(services.labeler, owner_id, trace_id, settings.evaluation_timeout_s)
    reviewing = owner_id != principal.user_id
    step_ids = {step["id"] for step in detail["steps"]}
    learned = (
        {**NO_SCORES, "shared_evaluator": REVIEWER_SHARED}
        if reviewing
        else trace_scores(services.scorer, owner_id, trace_id, step_ids, settings.score_timeout_s)
    )
    trained = trained_models(services, settings, principal, trace_id)
    return {**merge_evaluation(detail, *evaluations), **learned, "reviewing": reviewing, "trained_models": trained}


def trained_models(
    services: Services, settings: Settings, principal: Principal, trace_id: str
) -> list[dict[str, str]] | None:
    """The caller's own reward models trained on the trace, newest first: asked under the caller's id, never the
    trace owner's. None while the trainer is out of reach: the rest of the trace still reads."""
    message = trainer_pb2.ListRewardModelsRequest(owner_id=principal.user_id, trace_id=trace_id)
    response = tolerating_outage("trainer", services.trainer.ListRewardModels, message, settings.rpc_timeout_s)
    if response is None:
        return None
    return [{"id": model.id, "name": model.name} for model in response.reward_models]


@router.post(
    "/traces/{trace_id}/score",
    status_code=status.HTTP_202_ACCEPTED,
    summary="Score every action of the trace with a reward model",
)
def score_trace(
    services: Services, settings: Settings, trace_id: str, body: ScoreBody, principal: Writer
) -> dict[str, Any]:
    """`ScoringRun`: queued or running, or the finished run of this trace revision and checkpoint (no new work).

    404 for another owner's trace or model, 403 for a trace the caller reviews, 422 when the trace has no assistant
    response or tool call or the model was trained without action comparisons, 409 while the model has not
    succeeded.
    """
    require_owner(services, settings, principal, trace_id, "score it")
    message = scorer_pb2.ScoreTraceRequest(
        owner_id=principal.user_id, trace_id=trace_id, reward_model_id=body.reward_model_id
    )
    return scoring_run_json(services.scorer.ScoreTrace(message, timeout=settings.rpc_timeout_s).scoring_run)


@router.post(
    "/traces/{trace_id}/relabel",
    status_code=status.HTTP_202_ACCEPTED,
    summary="Label and score the trace's current revision again",
)
def relabel_trace(services: Services, settings: Settings, trace_id: str, principal: Writer) -> dict[str, Any]:
    """Forget the kept labels and queue a new evaluation: `{revision, status}`; 404 for another owner's trace, 403
    for one the caller reviews."""
    require_owner(services, settings, principal, trace_id, "relabel it")
    message = labeler_pb2.RelabelTraceRequest(owner_id=principal.user_id, trace_id=trace_id)
    response = services.labeler.RelabelTrace(message, timeout=settings.rpc_timeout_s)
    return {"revision": response.revision, "status": enum_name(common_pb2.JobStatus, response.status)}


@router.delete("/traces/{trace_id}", status_code=status.HTTP_204_NO_CONTENT, summary="Delete a trace")
def delete_trace(services: Services, settings: Settings, trace_id: str, principal: Writer) -> Response:
    """Delete the trace with its steps, spans and annotations; 403 for a trace the caller reviews."""
    message = ingest_pb2.DeleteTraceRequest(owner_id=principal.user_id, trace_id=trace_id)
    services.ingest.DeleteTrace(message, timeout=settings.rpc_timeout_s)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
