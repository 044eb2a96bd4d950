"""/api/v1/admin/evaluator: the operator's controls of the shared evaluator's data, behind the admin key.

Every change is recorded with who and when: the operator names themselves in `X-Stash-Operator`
(`stash-rm evaluator` sends the local user name); without it the action is recorded as `admin`.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Path, Query, Request, status
from pydantic import Field

from stash.rm.v1 import evaluator_pb2
from stash_common.db import transaction
from stash_common.messages import struct_of
from stash_gateway.openapi import RequestBody
from stash_gateway.rest_json import message_json
from stash_gateway.routes.admin import ADMIN_PREFIX, require_admin
from stash_gateway.routes.evaluator import releases_json
from stash_gateway.state import Services, Settings
from stash_gateway.store import find_user

router = APIRouter(
    prefix=f"{ADMIN_PREFIX}/evaluator", tags=["shared evaluator (admin)"], dependencies=[Depends(require_admin)]
)


def operator_of(x_stash_operator: Annotated[str | None, Header(max_length=64)] = None) -> str:
    """Who the operator says they are, recorded with each action."""
    return x_stash_operator.strip() if x_stash_operator and x_stash_operator.strip() else "admin"


Operator = Annotated[str, Depends(operator_of)]
CandidateId = Annotated[str, Path(min_length=1, max_length=64, description="the candidate's id")]
ReleaseNumber = Annotated[int, Path(ge=1, le=2**31 - 1, description="the release's number")]


class PolicyBody(RequestBody):
    """`{agreeing_reviews}`."""

    agreeing_reviews: int = Field(ge=1, le=10, description="How many agreeing reviews admit a comparison")


class TrainingPolicyBody(RequestBody):
    """The training policy; a key left out takes its default."""

    base_model: str | None = Field(default=None, min_length=1, max_length=500, description="None: the default")
    epochs: int = Field(default=1, ge=1, le=50)
    max_pairs: int = Field(default=2000, ge=2, le=100_000)
    schedule_minutes: int = Field(default=0, ge=0, le=44_640, description="Between scheduled candidates; 0: off")
    min_new_comparisons: int = Field(
        default=50, ge=1, le=1_000_000, description="Newly admitted comparisons a scheduled candidate needs"
    )
    primary_benchmark: str | None = Field(default=None, min_length=1, max_length=100, description="None: first name")
    margin: float = Field(default=0.0, ge=-1.0, le=1.0, description="How much better on the primary benchmark")
    slice_tolerance: float = Field(default=0.05, ge=0.0, le=1.0, description="How much worse a slice may be")
    auto_release: bool = Field(default=False, description="Release a passing candidate without approval")


class FreezeBody(RequestBody):
    """`{name, task_groups}`."""

    name: str = Field(min_length=1, max_length=100)
    task_groups: list[str] = Field(max_length=10_000, description="The task groups the benchmark holds out")


@router.put("/reviewers/{name_or_id}", summary="Name an evaluator reviewer")
def put_reviewer(
    request: Request, services: Services, settings: Settings, name_or_id: str, operator: Operator
) -> dict[str, Any]:
    """Let this account review comparisons; 404 for an unknown account."""
    with transaction(request.app.state.sessions) as session:
        user_id = find_user(session, name_or_id).id
    message = evaluator_pb2.NameReviewerRequest(actor_id=operator, user_id=user_id)
    return message_json(services.evaluator.NameReviewer(message, timeout=settings.rpc_timeout_s))


@router.delete("/reviewers/{name_or_id}", status_code=status.HTTP_204_NO_CONTENT, summary="Remove a reviewer")
def delete_reviewer(
    request: Request, services: Services, settings: Settings, name_or_id: str, operator: Operator
) -> None:
    """Stop this account reviewing; its reviews stay."""
    with transaction(request.app.state.sessions) as session:
        user_id = find_user(session, name_or_id).id
    message = evaluator_pb2.RemoveReviewerRequest(actor_id=operator, user_id=user_id)
    services.evaluator.RemoveReviewer(message, timeout=settings.rpc_timeout_s)


@router.put("/policy", summary="Set the review policy")
def put_policy(services: Services, settings: Settings, body: PolicyBody, operator: Operator) -> dict[str, Any]:
    """How many agreeing reviews admit a comparison."""
    message = evaluator_pb2.SetReviewPolicyRequest(actor_id=operator, agreeing_reviews=body.agreeing_reviews)
    return message_json(services.evaluator.SetReviewPolicy(message, timeout=settings.rpc_timeout_s))


@router.get("/stats", summary="Corpus and review statistics")
def get_stats(services: Services, settings: Settings) -> dict[str, Any]:
    """Counts by status, source and action type, the reviewers and every disagreement with its reviews."""
    message = evaluator_pb2.GetEvaluatorStatsRequest()
    return message_json(services.evaluator.GetEvaluatorStats(message, timeout=settings.rpc_timeout_s))


@router.post("/corpus", summary="Collect candidate comparisons")
def post_corpus(services: Services, settings: Settings, operator: Operator) -> dict[str, Any]:
    """Build candidate comparisons from every consented account's traces; answers how many were new."""
    message = evaluator_pb2.CollectCorpusRequest(actor_id=operator)
    return message_json(services.evaluator.CollectCorpus(message, timeout=settings.rpc_timeout_s))


@router.post("/benchmarks", status_code=status.HTTP_201_CREATED, summary="Freeze a benchmark")
def post_benchmark(services: Services, settings: Settings, body: FreezeBody, operator: Operator) -> dict[str, Any]:
    """A new immutable version from the admitted comparisons of these task groups (or the unchanged latest)."""
    message = evaluator_pb2.FreezeBenchmarkRequest(actor_id=operator, name=body.name, task_groups=body.task_groups)
    return message_json(services.evaluator.FreezeBenchmark(message, timeout=settings.rpc_timeout_s).benchmark)


@router.get("/benchmarks", summary="Every benchmark version")
def get_benchmarks(services: Services, settings: Settings) -> list[dict[str, Any]]:
    """By name, then version."""
    response = services.evaluator.ListBenchmarks(evaluator_pb2.ListBenchmarksRequest(), timeout=settings.rpc_timeout_s)
    return [message_json(benchmark) for benchmark in response.benchmarks]


@router.post("/snapshots", status_code=status.HTTP_201_CREATED, summary="Take a corpus snapshot")
def post_snapshot(services: Services, settings: Settings, operator: Operator) -> dict[str, Any]:
    """Store every admitted, consented comparison outside the benchmarks in object storage."""
    message = evaluator_pb2.TakeSnapshotRequest(actor_id=operator)
    return message_json(services.evaluator.TakeSnapshot(message, timeout=settings.rpc_timeout_s))


@router.get("/actions", summary="What operators did")
def get_actions(
    services: Services, settings: Settings, limit: int = Query(default=100, ge=1, le=1000)
) -> list[dict[str, Any]]:
    """Every recorded operator action with who and when, newest first."""
    message = evaluator_pb2.ListOperatorActionsRequest(limit=limit)
    response = services.evaluator.ListOperatorActions(message, timeout=settings.rpc_timeout_s)
    return [message_json(action) for action in response.actions]


@router.put("/training-policy", summary="Set the training policy")
def put_training_policy(
    services: Services, settings: Settings, body: TrainingPolicyBody, operator: Operator
) -> dict[str, Any]:
    """What candidates train with, the schedule, and the release gate."""
    policy = struct_of(body.model_dump())
    message = evaluator_pb2.SetTrainingPolicyRequest(actor_id=operator, policy=policy)
    return message_json(services.evaluator.SetTrainingPolicy(message, timeout=settings.rpc_timeout_s).policy)


@router.get("/training-policy", summary="The training policy")
def get_training_policy(services: Services, settings: Settings) -> dict[str, Any]:
    """The policy in force with who set it and when (empty while the defaults apply)."""
    message = evaluator_pb2.GetTrainingPolicyRequest()
    return message_json(services.evaluator.GetTrainingPolicy(message, timeout=settings.rpc_timeout_s).policy)


@router.post("/candidates", status_code=status.HTTP_201_CREATED, summary="Train a candidate")
def post_candidate(services: Services, settings: Settings, operator: Operator) -> dict[str, Any]:
    """Take a corpus snapshot and queue a candidate trained from it under the training policy."""
    message = evaluator_pb2.TrainCandidateRequest(actor_id=operator)
    return message_json(services.evaluator.TrainCandidate(message, timeout=settings.rpc_timeout_s).candidate)


@router.get("/candidates", summary="Every candidate")
def get_candidates(services: Services, settings: Settings) -> list[dict[str, Any]]:
    """Newest first, with inputs, benchmark reports, the gate's decision and its reasons."""
    response = services.evaluator.ListCandidates(evaluator_pb2.ListCandidatesRequest(), timeout=settings.rpc_timeout_s)
    return [message_json(candidate) for candidate in response.candidates]


@router.post("/candidates/{candidate_id}/approve", summary="Release a candidate awaiting approval")
def post_approve(
    services: Services, settings: Settings, candidate_id: CandidateId, operator: Operator
) -> dict[str, Any]:
    """Number it as the next release and publish it to the scorer; 409 unless it passed the gate and waits."""
    message = evaluator_pb2.ApproveCandidateRequest(actor_id=operator, candidate_id=candidate_id)
    return message_json(services.evaluator.ApproveCandidate(message, timeout=settings.rpc_timeout_s).release)


@router.post("/releases/{number}/rollback", summary="Roll back to an earlier release")
def post_rollback(services: Services, settings: Settings, number: ReleaseNumber, operator: Operator) -> dict[str, Any]:
    """Make this release current again; the scorer shows its scores at once and rescores with it."""
    message = evaluator_pb2.RollbackReleaseRequest(actor_id=operator, number=number)
    return message_json(services.evaluator.RollbackRelease(message, timeout=settings.rpc_timeout_s).release)


@router.get("/releases", summary="Every release")
def get_releases(services: Services, settings: Settings) -> dict[str, Any]:
    """Newest first, with whether the scorer acknowledged each; and the current release's number."""
    response = services.evaluator.ListReleases(evaluator_pb2.ListReleasesRequest(), timeout=settings.rpc_timeout_s)
    return releases_json(response)
