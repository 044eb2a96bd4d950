"""Automatic annotation in the REST shapes: labels and rewards merged into steps, task and trace scores.

The trace view shows the newest succeeded evaluation (so labels stay visible while a grown trace is
being relabeled) next to the status of the newest one. Reading never fails because the labeler is
down: the trace comes back without its evaluation. Every labeler read is bounded by the caller's
`timeout_s` (GatewaySettings.evaluation_timeout_s), short so that a slow labeler delays a view little.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stash.rm.v1 import common_pb2, labeler_pb2
from stash.rm.v1.labeler_pb2_grpc import LabelerServiceStub
from stash_common.requests import PAGE_LIMIT_MAX
from stash_gateway.peers import tolerating_outage
from stash_gateway.rest_json import enum_name, optional, struct_json, timestamp_json

PATTERN_TRACES_MAX = 10_000
IMPORTED, AUTOMATIC = "imported", "automatic"  # where a step reward or the task scores came from


def trace_evaluations(
    labeler: LabelerServiceStub, owner_id: str, trace_id: str, timeout_s: float
) -> tuple[labeler_pb2.TraceEvaluation | None, labeler_pb2.TraceEvaluation | None]:
    """The newest evaluation of a trace and its newest succeeded one (the same when it succeeded)."""
    request = labeler_pb2.GetTraceEvaluationRequest(owner_id=owner_id, trace_id=trace_id)
    latest = tolerating_outage("labeler", labeler.GetTraceEvaluation, request, timeout_s)
    if latest is None or not latest.HasField("evaluation"):
        return None, None
    if latest.evaluation.status == common_pb2.JOB_STATUS_SUCCEEDED:
        return latest.evaluation, latest.evaluation
    request.succeeded_only = True
    shown = tolerating_outage("labeler", labeler.GetTraceEvaluation, request, timeout_s)
    return latest.evaluation, shown.evaluation if shown is not None and shown.HasField("evaluation") else None


def merge_evaluation(
    detail: dict[str, Any], latest: labeler_pb2.TraceEvaluation | None, shown: labeler_pb2.TraceEvaluation | None
) -> dict[str, Any]:
    """Add `evaluation`, `step_scores`, and each step's `metadata.label` / `metadata.reward` to a TraceDetail.

    Imported supervision is kept (spec: Step scores): a step imported with `metadata.reward` keeps it, marked
    `reward_source: "imported"`, with the rule breakdown beside it as `metadata.rule_reward`; a trace imported
    with `metadata.step_scores` keeps those as `step_scores` (`step_scores_source: "imported"`), with the rule
    task scores as `rule_step_scores`. Otherwise the rule scores are `reward` and `step_scores` ("automatic").
    """
    detail["evaluation"] = _evaluation_json(latest, shown)
    rule_tasks = [_task_json(task) for task in shown.task_scores] if shown is not None else []
    imported_tasks = detail["metadata"].get("step_scores")
    if isinstance(imported_tasks, list):
        detail.update(step_scores=imported_tasks, step_scores_source=IMPORTED, rule_step_scores=rule_tasks)
    else:
        detail.update(step_scores=rule_tasks, step_scores_source=AUTOMATIC, rule_step_scores=rule_tasks)
    detail["process_patterns"] = [_finding_json(item) for item in shown.process_patterns] if shown is not None else []
    for step in detail["steps"]:
        if "reward" in step["metadata"]:
            step["metadata"]["reward_source"] = IMPORTED
    if shown is None:
        return detail
    by_step = {step.step_id: step for step in shown.steps}
    for step in detail["steps"]:
        evaluated = by_step.get(step["id"])
        if evaluated is not None:
            step["metadata"] = _merged_step_metadata(step["metadata"], _step_metadata(evaluated))
    return detail


def _merged_step_metadata(stored: dict[str, Any], automatic: dict[str, Any]) -> dict[str, Any]:
    """The step's metadata with the automatic labels; an imported reward stays, the rule one goes beside it."""
    rule_reward = automatic.pop("reward", None)
    merged = {**stored, **automatic}
    if stored.get("reward_source") == IMPORTED:
        if rule_reward is not None:
            merged["rule_reward"] = rule_reward
    elif rule_reward is not None:
        merged.update(reward=rule_reward, reward_source=AUTOMATIC)
    return merged


def _evaluation_json(
    latest: labeler_pb2.TraceEvaluation | None, shown: labeler_pb2.TraceEvaluation | None
) -> dict[str, Any] | None:
    if latest is None:
        return None
    return {
        "revision": latest.revision,
        "status": enum_name(common_pb2.JobStatus, latest.status),
        "error": optional(latest, "error"),
        "shown_revision": shown.revision if shown is not None else None,
        "labeler": shown.labeler if shown is not None else None,
        "score": optional(shown, "trace_score") if shown is not None else None,
        "outcome": enum_name(common_pb2.Outcome, shown.outcome) if shown is not None else None,
        "evaluated_at": timestamp_json(shown, "created_at") if shown is not None else None,
    }


def pattern_json(pattern: labeler_pb2.Pattern) -> dict[str, Any]:
    """`{pattern, taxonomy, severity, source, confidence}` of a detected pattern."""
    return {
        "pattern": pattern.name,
        "taxonomy": pattern.taxonomy,
        "severity": pattern.severity,
        "source": enum_name(labeler_pb2.PatternSource, pattern.source),
        "confidence": optional(pattern, "confidence"),
    }


def _finding_json(finding: labeler_pb2.ProcessFinding) -> dict[str, Any]:
    """A process pattern of a stored trace with the step range it covers and the suggestion."""
    return {
        **pattern_json(finding.pattern),
        "first_step_id": finding.first_step_id,
        "last_step_id": finding.last_step_id,
        "first_step_index": finding.first_step_index,
        "last_step_index": finding.last_step_index,
        "suggestion": finding.suggestion,
    }


def _task_json(task: labeler_pb2.TaskScore) -> dict[str, Any]:
    return {
        "task_id": task.task_id,
        "first_step_id": task.first_step_id,
        "last_step_id": task.last_step_id,
        "answer_points": task.answer_points,
        "work_cost": task.work_cost,
        "score": task.score,
        "capped": task.capped,
    }


def _step_metadata(step: labeler_pb2.StepEvaluation) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    if step.HasField("label"):
        metadata["label"] = _label_json(step.label)
        metadata["label_source"] = enum_name(labeler_pb2.LabelSource, step.label_source)
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


def _label_json(label: labeler_pb2.StepLabel) -> dict[str, Any]:
    fields = {descriptor.name: value for descriptor, value in label.ListFields()}
    return {"chunk_id": label.chunk_id, "task_id": label.task_id, "actor": label.actor, **fields}


def summaries(
    labeler: LabelerServiceStub, owner_id: str, trace_ids: Sequence[str], timeout_s: float
) -> dict[str, dict[str, Any]]:
    """The newest automatic score of each listed trace that has one."""
    if not trace_ids:
        return {}
    request = labeler_pb2.BatchGetEvaluationSummariesRequest(owner_id=owner_id, trace_ids=trace_ids)
    response = tolerating_outage("labeler", labeler.BatchGetEvaluationSummaries, request, timeout_s)
    found = response.summaries if response is not None else ()
    return {item.trace_id: _summary_json(item) for item in found}


def _summary_json(summary: labeler_pb2.EvaluationSummary) -> dict[str, Any]:
    return {
        "revision": summary.revision,
        "score": optional(summary, "trace_score"),
        "outcome": enum_name(common_pb2.Outcome, summary.outcome),
    }


def pattern_names(
    labeler: LabelerServiceStub, owner_id: str, trace_ids: Sequence[str], timeout_s: float
) -> dict[str, list[str]]:
    """The process patterns found in each listed trace's latest evaluation, by name, by first step.

    One labeler call for the whole list (another only when its findings fill more than a page); every
    trace is left out when the labeler is out of reach."""
    if not trace_ids:
        return {}
    found: dict[str, list[labeler_pb2.ProcessFinding]] = {trace_id: [] for trace_id in trace_ids}
    while True:
        request = labeler_pb2.ListProcessPatternsRequest(
            owner_id=owner_id,
            trace_ids=trace_ids,
            page=common_pb2.PageRequest(limit=PAGE_LIMIT_MAX, offset=sum(map(len, found.values()))),
        )
        page = tolerating_outage("labeler", labeler.ListProcessPatterns, request, timeout_s)
        if page is None:
            return {}
        for finding in page.findings:
            found[finding.trace_id].append(finding)
        if not page.findings or sum(map(len, found.values())) >= page.page_info.total:
            break
    return {
        trace_id: [finding.pattern.name for finding in sorted(findings, key=_first_step)]
        for trace_id, findings in found.items()
    }


def _first_step(finding: labeler_pb2.ProcessFinding) -> tuple[int, str]:
    return finding.first_step_index, finding.pattern.name


def traces_with_pattern(labeler: LabelerServiceStub, owner_id: str, pattern: str, timeout_s: float) -> list[str]:
    """Ids of the owner's traces whose latest evaluation found `pattern` (one finding per pattern and trace)."""
    trace_ids: list[str] = []
    while len(trace_ids) < PATTERN_TRACES_MAX:
        request = labeler_pb2.ListProcessPatternsRequest(
            owner_id=owner_id,
            pattern=pattern,
            page=common_pb2.PageRequest(limit=PAGE_LIMIT_MAX, offset=len(trace_ids)),
        )
        page = labeler.ListProcessPatterns(request, timeout=timeout_s)
        trace_ids += [finding.trace_id for finding in page.findings]
        if not page.findings or len(trace_ids) >= page.page_info.total:
            break
    return trace_ids
