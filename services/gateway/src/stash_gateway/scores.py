"""Learned scores in the REST shapes: trace scores, action scores and scoring runs, as the scorer keeps them.

The scorer owns them and sends each model's name with every score, so a trace view needs no read of
the trainer. Like the labeler's evaluations they are a part of the trace views, not their subject:
a scorer out of reach leaves `scores`, `action_scores` and `scoring_runs` empty and `latest_score`
null instead of failing the view, every read is bounded by the caller's `timeout_s`
(GatewaySettings.score_timeout_s), and once the first read finds the scorer out of reach the view
does not wait for the others.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stash.rm.v1 import common_pb2, scorer_pb2
from stash.rm.v1.scorer_pb2_grpc import ScorerServiceStub
from stash_gateway.peers import tolerating_outage
from stash_gateway.rendering import enum_name, optional, timestamp_json


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


def trace_scores(scorer: ScorerServiceStub, owner_id: str, trace_id: str, timeout_s: float) -> dict[str, Any]:
    """A TraceDetail's `scores`, `action_scores` and `scoring_runs` (latest per model)."""
    key = {"owner_id": owner_id, "trace_id": trace_id}
    runs = tolerating_outage("scorer", scorer.ListScoringRuns, scorer_pb2.ListScoringRunsRequest(**key), timeout_s)
    if runs is None:
        return {"scores": [], "action_scores": [], "scoring_runs": []}
    scores = tolerating_outage("scorer", scorer.ListTraceScores, scorer_pb2.ListTraceScoresRequest(**key), timeout_s)
    actions = tolerating_outage("scorer", scorer.ListActionScores, scorer_pb2.ListActionScoresRequest(**key), timeout_s)
    return {
        "scores": [trace_score_json(score) for score in scores.scores] if scores is not None else [],
        "action_scores": [action_score_json(score) for score in actions.action_scores] if actions is not None else [],
        "scoring_runs": [scoring_run_json(run) for run in runs.scoring_runs],
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
