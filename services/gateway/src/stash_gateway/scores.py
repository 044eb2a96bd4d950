"""Learned scores in the REST shapes: trace scores, action scores and scoring runs, as the scorer keeps them.

The scorer owns them and sends each model's name with every score, so a trace view needs no read of
the trainer. Like the labeler's evaluations they are a part of the trace views, not their subject:
a scorer out of reach leaves `scores`, `action_scores` and `scoring_runs` empty and `latest_score`
null instead of failing the view, every read is bounded by the caller's `timeout_s`
(GatewaySettings.score_timeout_s), and once the first read finds the scorer out of reach the view
does not wait for the others.

Action scores are keyed by step id, and the scorer drops those of removed steps only when its debounced
sweep acts on a new revision; until then it still holds scores of steps a re-import replaced. A trace view
therefore keeps only the action scores of the steps it shows, which ingest read at the current revision.

The shared evaluator's scores come apart (`shared_evaluator`): the release that scored the trace, which is the
current release once it has, else the release most recently current that did, and why there is none otherwise.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from stash.rm.v1 import common_pb2, scorer_pb2
from stash.rm.v1.scorer_pb2_grpc import ScorerServiceStub
from stash_gateway.peers import tolerating_outage
from stash_gateway.rest_json import enum_name, optional, timestamp_json


def scoring_run_json(run: scorer_pb2.ScoringRun) -> dict[str, Any]:
    """`ScoringRun`: `{id, trace_id, reward_model_id, status, error, created_at, started_at, finished_at}`."""
    return {
        "id": run.id,
        "trace_id": run.trace_id,
        "reward_model_id": run.reward_model_id,
        "status": enum_name(common_pb2.JobStatus, run.status),
        "error": optional(run, "error"),
        "created_at": timestamp_json(run, "created_at"),
        "started_at": timestamp_json(run, "started_at"),
        "finished_at": timestamp_json(run, "finished_at"),
    }


def trace_score_json(score: scorer_pb2.TraceScore) -> dict[str, Any]:
    """A raw trace reward: `{reward_model_id, reward_model_name, score, created_at}`."""
    return {
        "reward_model_id": score.reward_model_id,
        "reward_model_name": score.reward_model_name,
        "score": score.score,
        "created_at": timestamp_json(score, "created_at"),
    }


def action_score_json(score: scorer_pb2.ActionScore) -> dict[str, Any]:
    """An action's learned score: `{reward_model_id, reward_model_name, step_id, score, credit, created_at}`."""
    return {
        "reward_model_id": score.reward_model_id,
        "reward_model_name": score.reward_model_name,
        "step_id": score.step_id,
        "score": score.score,
        "credit": score.credit,
        "created_at": timestamp_json(score, "created_at"),
    }


def latest_score_json(score: common_pb2.LatestScore) -> dict[str, Any]:
    """`TraceSummary.latest_score`: `{reward_model_id, reward_model_name, score}`."""
    return {
        "reward_model_id": score.reward_model_id,
        "reward_model_name": score.reward_model_name,
        "score": score.score,
    }


SCORER_OUT_OF_REACH = "the scorer is out of reach; try again shortly"


def shared_evaluator_json(
    response: scorer_pb2.GetEvaluatorScoresResponse | None, step_ids: Collection[str]
) -> dict[str, Any]:
    """`SharedEvaluatorScores`: `{release, current_release, trace_score, action_scores: [{step_id, score, credit}],
    scored_at, reason}`; `release` null and `reason` set when no release has scored the trace."""
    if response is None or not response.HasField("scores"):
        return {
            "release": None,
            "current_release": optional(response, "current_release") if response is not None else None,
            "trace_score": None,
            "action_scores": [],
            "scored_at": None,
            "reason": response.reason if response is not None else SCORER_OUT_OF_REACH,
        }
    scores = response.scores
    return {
        "release": scores.release,
        "current_release": optional(response, "current_release"),
        "trace_score": optional(scores, "trace_score"),
        "action_scores": [
            {"step_id": action.step_id, "score": action.score, "credit": action.credit}
            for action in scores.action_scores
            if action.step_id in step_ids
        ],
        "scored_at": timestamp_json(scores, "scored_at"),
        "reason": None,
    }


def shared_trace_scores(
    scorer: ScorerServiceStub, owner_id: str, trace_ids: Sequence[str], timeout_s: float
) -> dict[str, dict[str, Any]]:
    """Each listed trace's `shared_evaluator` summary `{release, score, scored_at}`, for the traces that have one."""
    if not trace_ids:
        return {}
    request = scorer_pb2.BatchGetEvaluatorScoresRequest(owner_id=owner_id, trace_ids=trace_ids)
    response = tolerating_outage("scorer", scorer.BatchGetEvaluatorScores, request, timeout_s)
    found = response.scores if response is not None else {}
    return {
        trace_id: {
            "release": scores.release,
            "score": optional(scores, "trace_score"),
            "scored_at": timestamp_json(scores, "scored_at"),
        }
        for trace_id, scores in found.items()
    }


def trace_scores(
    scorer: ScorerServiceStub, owner_id: str, trace_id: str, step_ids: Collection[str], timeout_s: float
) -> dict[str, Any]:
    """A TraceDetail's `scores`, `action_scores` of the shown `step_ids` (the current revision's),
    `scoring_runs` (latest per model) and `shared_evaluator`."""
    key = {"owner_id": owner_id, "trace_id": trace_id}
    # The scorer publishes a run's action scores, trace score and status in one transaction, but these are
    # separate reads: in this order, a run shown as succeeded has its action scores shown too, and action
    # scores come with their trace score (a run published between two reads may show its scores while its
    # status still says running, never the other way round).
    runs = tolerating_outage("scorer", scorer.ListScoringRuns, scorer_pb2.ListScoringRunsRequest(**key), timeout_s)
    if runs is None:
        return {
            "scores": [],
            "action_scores": [],
            "scoring_runs": [],
            "shared_evaluator": shared_evaluator_json(None, ()),
        }
    actions = tolerating_outage("scorer", scorer.ListActionScores, scorer_pb2.ListActionScoresRequest(**key), timeout_s)
    scores = tolerating_outage("scorer", scorer.ListTraceScores, scorer_pb2.ListTraceScoresRequest(**key), timeout_s)
    shared = tolerating_outage(
        "scorer", scorer.GetEvaluatorScores, scorer_pb2.GetEvaluatorScoresRequest(**key), timeout_s
    )
    return {
        "scores": [trace_score_json(score) for score in scores.scores] if scores is not None else [],
        "action_scores": [action_score_json(score) for score in actions.action_scores if score.step_id in step_ids]
        if actions is not None
        else [],
        "scoring_runs": [scoring_run_json(run) for run in runs.scoring_runs],
        "shared_evaluator": shared_evaluator_json(shared, step_ids),
    }


def latest_scores(
    scorer: ScorerServiceStub, owner_id: str, trace_ids: Sequence[str], timeout_s: float
) -> dict[str, dict[str, Any]]:
    """Each listed trace's `latest_score`, for the traces that have one."""
    if not trace_ids:
        return {}
    request = scorer_pb2.BatchGetLatestScoresRequest(owner_id=owner_id, trace_ids=trace_ids)
    response = tolerating_outage("scorer", scorer.BatchGetLatestScores, request, timeout_s)
    found = response.latest_scores if response is not None else {}
    return {trace_id: latest_score_json(score) for trace_id, score in found.items()}
