"""/api/v1/admin/evaluator: the operator's controls of the shared evaluator's data, behind the admin key.

Every change is recorded with who and when: the operator names themselves in `X-Stash-Operator`
(`stash-rm evaluator` sends the local user name); without it the action is recorded as `admin`.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request, status
from pydantic import Field

from stash.rm.v1 import evaluator_pb2
from stash_common.db import transaction
from stash_gateway.openapi import RequestBody
from stash_gateway.routes.admin import ADMIN_PREFIX, require_admin
from stash_gateway.routes.evaluator import message_json
from stash_gateway.state import Services, Settings
from stash_gateway.store import find_user

router = APIRouter(
    prefix=f"{ADMIN_PREFIX}/evaluator", tags=["shared evaluator (admin)"], dependencies=[Depends(require_admin)]
)


def operator_of(x_stash_operator: Annotated[str | None, Header(max_length=64)] = None) -> str:
    """Who the operator says they are, recorded with each action."""
    return x_stash_operator.strip() if x_stash_operator and x_stash_operator.strip() else "admin"


Operator = Annotated[str, Depends(operator_of)]


class PolicyBody(RequestBody):
    """`{agreeing_reviews}`."""

    agreeing_reviews: int = Field(ge=1, le=10, description="How many agreeing reviews admit a comparison")


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
