"""The scorer's messages in the REST shapes, and trace views that survive a scorer out of reach."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from google.protobuf import timestamp_pb2

from stash.rm.v1 import common_pb2, scorer_pb2
from stash_gateway.scores import (
    SCORER_OUT_OF_REACH,
    latest_scores,
    scoring_run_json,
    shared_evaluator_json,
    trace_scores,
)

CREATED = timestamp_pb2.Timestamp(seconds=1_767_225_600)  # 2026-01-01T00:00:00Z


def _run(**fields: Any) -> scorer_pb2.ScoringRun:
    return scorer_pb2.ScoringRun(id="r1", trace_id="t1", reward_model_id="m1", created_at=CREATED, **fields)


def test_a_scoring_run_renders_its_status_by_name_and_unset_times_as_null() -> None:
    queued = scoring_run_json(_run(status=common_pb2.JOB_STATUS_QUEUED, trace_revision=2))

    assert queued == {
        "id": "r1",
        "trace_id": "t1",
        "reward_model_id": "m1",
        "status": "queued",
        "error": None,
        "created_at": "2026-01-01T00:00:00Z",
        "started_at": None,
        "finished_at": None,
    }
    failed = scoring_run_json(_run(status=common_pb2.JOB_STATUS_FAILED, error="the trace changed", finished_at=CREATED))
    assert (failed["status"], failed["error"], failed["finished_at"]) == (
        "failed",
        "the trace changed",
        "2026-01-01T00:00:00Z",
    )


class _Scorer:
    """Answers the trace view's reads from fixed messages, counting the calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def ListScoringRuns(self, request: scorer_pb2.ListScoringRunsRequest, timeout: float) -> Any:
        self.calls.append("runs")
        return scorer_pb2.ListScoringRunsResponse(scoring_runs=[_run(status=common_pb2.JOB_STATUS_SUCCEEDED)])

    def ListTraceScores(self, request: scorer_pb2.ListTraceScoresRequest, timeout: float) -> Any:
        self.calls.append("scores")
        score = scorer_pb2.TraceScore(reward_model_id="m1", reward_model_name="refunds", score=1.25, created_at=CREATED)
        return scorer_pb2.ListTraceScoresResponse(scores=[score])

    def ListActionScores(self, request: scorer_pb2.ListActionScoresRequest, timeout: float) -> Any:
        self.calls.append("actions")
        action = scorer_pb2.ActionScore(
            reward_model_id="m1",
            reward_model_name="refunds",
            step_id="s2",
            score=-0.5,
            credit=-0.25,
            created_at=CREATED,
            trace_id="t1",
            step_index=2,
        )
        return scorer_pb2.ListActionScoresResponse(action_scores=[action])

    def BatchGetLatestScores(self, request: scorer_pb2.BatchGetLatestScoresRequest, timeout: float) -> Any:
        self.calls.append("latest")
        latest = common_pb2.LatestScore(reward_model_id="m1", reward_model_name="refunds", score=0.75)
        return scorer_pb2.BatchGetLatestScoresResponse(latest_scores={"t1": latest})

    def GetEvaluatorScores(self, request: scorer_pb2.GetEvaluatorScoresRequest, timeout: float) -> Any:
        self.calls.append("shared")
        return scorer_pb2.GetEvaluatorScoresResponse(reason="no shared evaluator released yet")


class _Status(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode) -> None:
        self._code = code

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return "down"


class _DownScorer(_Scorer):
    def __init__(self, code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE) -> None:
        super().__init__()
        self.code = code

    def ListScoringRuns(self, request: scorer_pb2.ListScoringRunsRequest, timeout: float) -> Any:
        self.calls.append("runs")
        raise _Status(self.code)

    def BatchGetLatestScores(self, request: scorer_pb2.BatchGetLatestScoresRequest, timeout: float) -> Any:
        self.calls.append("latest")
        raise _Status(self.code)


def test_a_trace_view_lists_scores_action_scores_with_model_names_and_runs() -> None:
    learned = trace_scores(_Scorer(), "owner", "t1", {"s1", "s2"}, 10.0)

    assert learned["scores"] == [
        {"reward_model_id": "m1", "reward_model_name": "refunds", "score": 1.25, "created_at": "2026-01-01T00:00:00Z"}
    ]
    assert learned["action_scores"] == [
        {
            "reward_model_id": "m1",
            "reward_model_name": "refunds",
            "step_id": "s2",
            "score": -0.5,
            "credit": -0.25,
            "created_at": "2026-01-01T00:00:00Z",
        }
    ]
    assert [(run["id"], run["status"]) for run in learned["scoring_runs"]] == [("r1", "succeeded")]


def test_a_trace_view_leaves_out_the_action_scores_of_steps_it_does_not_show() -> None:
    learned = trace_scores(_Scorer(), "owner", "t1", {"s1"}, 10.0)

    assert learned["action_scores"] == []
    assert [score["score"] for score in learned["scores"]] == [1.25]


@pytest.mark.parametrize("code", [grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED])
def test_a_scorer_out_of_reach_leaves_the_lists_empty_after_one_wait(code: grpc.StatusCode) -> None:
    scorer = _DownScorer(code)

    learned = trace_scores(scorer, "owner", "t1", {"s2"}, 10.0)

    assert learned == {
        "scores": [],
        "action_scores": [],
        "scoring_runs": [],
        "shared_evaluator": shared_evaluator_json(None, ()),
    }
    assert scorer.calls == ["runs"]
    assert latest_scores(scorer, "owner", ["t1"], 10.0) == {}


class _PublishingScorer(_Scorer):
    """A run still running for the first `reads` reads, published (status and scores at once) after them."""

    def __init__(self, reads: int) -> None:
        super().__init__()
        self.reads = reads

    def _published(self) -> bool:
        return len(self.calls) > self.reads

    def ListScoringRuns(self, request: scorer_pb2.ListScoringRunsRequest, timeout: float) -> Any:
        self.calls.append("runs")
        status = common_pb2.JOB_STATUS_SUCCEEDED if self._published() else common_pb2.JOB_STATUS_RUNNING
        return scorer_pb2.ListScoringRunsResponse(scoring_runs=[_run(status=status)])

    def ListTraceScores(self, request: scorer_pb2.ListTraceScoresRequest, timeout: float) -> Any:
        published = super().ListTraceScores(request, timeout)
        return published if self._published() else scorer_pb2.ListTraceScoresResponse()

    def ListActionScores(self, request: scorer_pb2.ListActionScoresRequest, timeout: float) -> Any:
        published = super().ListActionScores(request, timeout)
        return published if self._published() else scorer_pb2.ListActionScoresResponse()


@pytest.mark.parametrize("reads", range(5))
def test_a_run_published_between_two_reads_never_shows_succeeded_without_its_scores(reads: int) -> None:
    learned = trace_scores(_PublishingScorer(reads), "owner", "t1", {"s2"}, 10.0)

    if learned["scoring_runs"][0]["status"] == "succeeded":
        assert [score["step_id"] for score in learned["action_scores"]] == ["s2"]
    if learned["action_scores"]:
        assert [score["score"] for score in learned["scores"]] == [1.25]


def test_a_scorer_error_that_is_no_outage_is_not_hidden() -> None:
    with pytest.raises(grpc.RpcError):
        trace_scores(_DownScorer(grpc.StatusCode.INTERNAL), "owner", "t1", {"s2"}, 10.0)


def test_the_trace_list_gets_each_scored_trace_latest_score_in_one_read() -> None:
    scorer = _Scorer()

    latest = latest_scores(scorer, "owner", ["t1", "t2"], 10.0)

    assert latest == {"t1": {"reward_model_id": "m1", "reward_model_name": "refunds", "score": 0.75}}
    assert scorer.calls == ["latest"]
    assert latest_scores(scorer, "owner", [], 10.0) == {}
    assert scorer.calls == ["latest"]


def _evaluator_scores() -> scorer_pb2.GetEvaluatorScoresResponse:
    actions = [
        scorer_pb2.ActionScore(reward_model_id="evaluator-release-3", step_id=step, score=score, credit=credit)
        for step, score, credit in (("s2", 1.5, 0.5), ("s4", -0.5, -0.25))
    ]
    scores = scorer_pb2.EvaluatorScores(release=3, trace_score=0.75, action_scores=actions, scored_at=CREATED)
    return scorer_pb2.GetEvaluatorScoresResponse(current_release=4, scores=scores)


def test_the_shared_evaluators_scores_keep_the_shown_steps_and_name_their_release() -> None:
    shared = shared_evaluator_json(_evaluator_scores(), {"s2"})

    assert shared == {
        "release": 3,
        "current_release": 4,
        "trace_score": 0.75,
        "action_scores": [{"step_id": "s2", "score": 1.5, "credit": 0.5}],
        "scored_at": "2026-01-01T00:00:00Z",
        "reason": None,
    }


def test_without_shared_scores_the_release_is_null_with_the_reason() -> None:
    before = scorer_pb2.GetEvaluatorScoresResponse(reason="no shared evaluator released yet")

    assert shared_evaluator_json(before, {"s2"}) == {
        "release": None,
        "current_release": None,
        "trace_score": None,
        "action_scores": [],
        "scored_at": None,
        "reason": "no shared evaluator released yet",
    }
    assert shared_evaluator_json(None, {"s2"})["reason"] == SCORER_OUT_OF_REACH
