"""Automatic annotation in the REST shapes: labels and rewards merged into steps, task and trace scores.

The trace view shows the newest succeeded evaluation (so labels stay visible while a grown trace is
being relabeled) next to the status of the newest one. Reading never fails because the labeler is
down: the trace comes back without its evaluation.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import grpc
import structlog

from stash.rm.v1 import common_pb2, labeler_pb2
from stash_gateway.rendering import optional, struct_json, timestamp_json

log = structlog.get_logger()
_STATUS_NAMES = {1: "queued", 2: "running", 3: "succeeded", 4: "failed"}
_OUTCOME_NAMES = {1: "success", 2: "failure", 3: "partial_success", 4: "insufficient_evidence"}
_SOURCE_NAMES = {1: "imported", 2: "llm", 3: "rules"}
_PATTERN_SOURCE_NAMES = {1: "rules", 2: "ml"}
PATTERN_TRACES_MAX = 10_000
_OUT_OF_REACH = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
READ_TIMEOUT_S = 10


def _tolerating_outage(call: Any, request: Any) -> Any | None:
    try:
        return call(request, timeout=READ_TIMEOUT_S)
    except grpc.RpcError as error:
        if error.code() not in _OUT_OF_REACH:
            raise
        log.warning("labeler out of reach; answering without evaluations", code=error.code().name)
        return None


def trace_evaluations(labeler: Any, owner_id: str, trace_id: str) -> tuple[Any | None, Any | None]:
    """The newest evaluation of a trace and its newest succeeded one (the same when it succeeded)."""
    request = labeler_pb2.GetTraceEvaluationRequest(owner_id=owner_id, trace_id=trace_id)
    latest = _tolerating_outage(labeler.GetTraceEvaluation, request)
    if latest is None or not latest.HasField("evaluation"):
        return None, None
    if latest.evaluation.status == 3:
        return latest.evaluation, latest.evaluation
    request.succeeded_only = True
    shown = _tolerating_outage(labeler.GetTraceEvaluation, request)
    return latest.evaluation, shown.evaluation if shown is not None and shown.HasField("evaluation") else None


def merge_evaluation(detail: dict[str, Any], latest: Any | None, shown: Any | None) -> dict[str, Any]:
    """Add `evaluation`, `step_scores`, and each step's `metadata.label` / `metadata.reward` to a TraceDetail."""
    detail["evaluation"] = _evaluation_json(latest, shown)
    detail["step_scores"] = [_task_json(task) for task in shown.task_scores] if shown is not None else []
    detail["process_patterns"] = [finding_json(item) for item in shown.process_patterns] if shown is not None else []
    if shown is None:
        return detail
    by_step = {step.step_id: step for step in shown.steps}
    for step in detail["steps"]:
        evaluated = by_step.get(step["id"])
        if evaluated is not None:
            step["metadata"] = {**step["metadata"], **_step_metadata(evaluated)}
    return detail


def _evaluation_json(latest: Any | None, shown: Any | None) -> dict[str, Any] | None:
    if latest is None:
        return None
    return {
        "revision": latest.revision,
        "status": _STATUS_NAMES.get(latest.status),
        "error": optional(latest, "error"),
        "shown_revision": shown.revision if shown is not None else None,
        "labeler": shown.labeler if shown is not None else None,
        "score": optional(shown, "trace_score") if shown is not None else None,
        "outcome": _OUTCOME_NAMES.get(shown.outcome) if shown is not None else None,
        "evaluated_at": timestamp_json(shown, "created_at") if shown is not None else None,
    }


def pattern_json(pattern: Any) -> dict[str, Any]:
    """`{pattern, taxonomy, severity, source, confidence}` of a detected pattern."""
    return {
        "pattern": pattern.name,
        "taxonomy": pattern.taxonomy,
        "severity": pattern.severity,
        "source": _PATTERN_SOURCE_NAMES.get(pattern.source),
        "confidence": optional(pattern, "confidence"),
    }


def finding_json(finding: Any) -> dict[str, Any]:
    """A process pattern of a stored trace with the step range it covers and the suggestion."""
    return {
        **pattern_json(finding.pattern),
        "first_step_id": finding.first_step_id,
        "last_step_id": finding.last_step_id,
        "first_step_index": finding.first_step_index,
        "last_step_index": finding.last_step_index,
        "suggestion": finding.suggestion,
    }


def _task_json(task: Any) -> dict[str, Any]:
    return {
        "task_id": task.task_id,
        "first_step_id": task.first_step_id,
        "last_step_id": task.last_step_id,
        "answer_points": task.answer_points,
        "work_cost": task.work_cost,
        "score": task.score,
        "capped": task.capped,
    }


def _step_metadata(step: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    if step.HasField("label"):
        metadata["label"] = _label_json(step.label)
        metadata["label_source"] = _SOURCE_NAMES.get(step.label_source)
        if step.HasField("label_model"):
            metadata["label_model"] = step.label_model
    if step.HasField("reward"):
        reward = step.reward
        metadata["reward"] = {
            "points": reward.points,
            "passed_back": reward.passed_back,
            "score": reward.credit,
            "credit": optional(step, "ordinal_credit"),
            "expected_credit": optional(step, "expected_credit"),
            "credit_distribution": struct_json(step, "credit_distribution"),
            "terms": [{"reason": term.reason, "points": term.points} for term in reward.terms],
        }
    return metadata


def _label_json(label: Any) -> dict[str, Any]:
    fields = {descriptor.name: value for descriptor, value in label.ListFields()}
    return {"chunk_id": label.chunk_id, "task_id": label.task_id, "actor": label.actor, **fields}


def summaries(labeler: Any, owner_id: str, trace_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The newest automatic score of each listed trace that has one."""
    if not trace_ids:
        return {}
    request = labeler_pb2.BatchGetEvaluationSummariesRequest(owner_id=owner_id, trace_ids=trace_ids)
    response = _tolerating_outage(labeler.BatchGetEvaluationSummaries, request)
    return {item.trace_id: _summary_json(item) for item in _items(response)}


def _items(response: Any | None) -> Iterable[Any]:
    return response.summaries if response is not None else ()


def _summary_json(summary: Any) -> dict[str, Any]:
    return {
        "revision": summary.revision,
        "score": optional(summary, "trace_score"),
        "outcome": _OUTCOME_NAMES.get(summary.outcome),
    }


def traces_with_pattern(labeler: Any, owner_id: str, pattern: str) -> list[str]:
    """Ids of the owner's traces whose latest evaluation found `pattern` (one finding per pattern and trace)."""
    trace_ids: list[str] = []
    while len(trace_ids) < PATTERN_TRACES_MAX:
        request = labeler_pb2.ListProcessPatternsRequest(
            owner_id=owner_id, pattern=pattern, page=common_pb2.PageRequest(limit=500, offset=len(trace_ids))
        )
        page = labeler.ListProcessPatterns(request, timeout=READ_TIMEOUT_S)
        trace_ids += [finding.trace_id for finding in page.findings]
        if not page.findings or len(trace_ids) >= page.page_info.total:
            break
    return trace_ids
