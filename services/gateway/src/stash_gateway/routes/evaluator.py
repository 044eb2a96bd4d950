"""/evaluator: an account's consent to improve the shared evaluator, the independent review queue, and the releases.

Everyone may read the releases (their notes and accuracy). The operator's side (reviewers, policies, statistics,
benchmarks, snapshots, candidates, approval and rollback) is `evaluator_admin.py`.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Query
from pydantic import Field, model_validator

from stash.rm.v1 import evaluator_pb2
from stash_gateway.auth import Reader, Writer
from stash_gateway.openapi import RequestBody
from stash_gateway.rest_json import message_json
from stash_gateway.routes import API_PREFIX
from stash_gateway.state import Services, Settings

router = APIRouter(prefix=f"{API_PREFIX}/evaluator", tags=["shared evaluator"])


class ConsentBody(RequestBody):
    """`{text_version, all_sources}` or `{text_version, source_ids}`."""

    text_version: str = Field(min_length=1, max_length=50, description="The version of the consent text shown")
    all_sources: bool = Field(default=False, description="Consent for all the account's traces")
    source_ids: list[str] = Field(default_factory=list, max_length=1000, description="Or only these owned sources")

    @model_validator(mode="after")
    def _one_scope(self) -> ConsentBody:
        if self.all_sources == bool(self.source_ids):
            raise ValueError("give all_sources: true or a non-empty source_ids, not both")
        return self


class ReviewBody(RequestBody):
    """`{comparison_id, verdict, note?}`: action A against action B as the queue showed them."""

    comparison_id: str = Field(min_length=1, max_length=64)
    verdict: Literal["better", "worse", "tie", "invalid"] = Field(description="Action A against action B")
    note: str | None = Field(default=None, max_length=2000)


@router.get("/consent", summary="The caller's consent and contribution")
def get_consent(services: Services, settings: Settings, principal: Reader) -> dict[str, Any]:
    """Every consent the caller gave (newest first), how many comparisons came from its data, and when it stopped."""
    request = evaluator_pb2.GetConsentRequest(owner_id=principal.user_id)
    return message_json(services.evaluator.GetConsent(request, timeout=settings.rpc_timeout_s))


@router.put("/consent", summary="Consent to improve the shared evaluator")
def put_consent(services: Services, settings: Settings, body: ConsentBody, principal: Writer) -> dict[str, Any]:
    """Open a consent for all the caller's traces or chosen sources it owns (closing the open one)."""
    request = evaluator_pb2.GrantConsentRequest(
        owner_id=principal.user_id,
        actor_id=principal.user_id,
        text_version=body.text_version,
        all_sources=body.all_sources,
        source_ids=body.source_ids,
    )
    return message_json(services.evaluator.GrantConsent(request, timeout=settings.rpc_timeout_s).consent)


@router.delete(
    "/consent", summary="Revoke the consent", responses={404: {"description": "the account has no open consent"}}
)
def delete_consent(services: Services, settings: Settings, principal: Writer) -> dict[str, Any]:
    """Close the caller's open consent: nothing of the caller's reaches a later snapshot, benchmark or queue."""
    request = evaluator_pb2.RevokeConsentRequest(owner_id=principal.user_id, actor_id=principal.user_id)
    return message_json(services.evaluator.RevokeConsent(request, timeout=settings.rpc_timeout_s).consent)


@router.get("/review-queue", summary="Comparisons for the caller to review")
def get_review_queue(
    services: Services, settings: Settings, principal: Reader, limit: int = Query(default=10, ge=1, le=50)
) -> list[dict[str, Any]]:
    """The next comparisons: context and actions A and B in an order drawn for the caller, without their origin."""
    request = evaluator_pb2.ListReviewQueueRequest(reviewer_id=principal.user_id, limit=limit)
    response = services.evaluator.ListReviewQueue(request, timeout=settings.rpc_timeout_s)
    return [message_json(item) for item in response.items]


@router.post("/reviews", status_code=201, summary="Review a comparison")
def post_review(services: Services, settings: Settings, body: ReviewBody, principal: Writer) -> dict[str, Any]:
    """Record the caller's verdict; 403 for one's own comparison, 409 for a second review."""
    request = evaluator_pb2.RecordReviewRequest(
        reviewer_id=principal.user_id, comparison_id=body.comparison_id, verdict=body.verdict, note=body.note
    )
    return message_json(services.evaluator.RecordReview(request, timeout=settings.rpc_timeout_s))


@router.get("/releases", summary="The shared evaluator's releases")
def get_releases(services: Services, settings: Settings, principal: Reader) -> dict[str, Any]:
    """Every release (newest first) with its notes and benchmark accuracy (without the per-owner slices), and the
    current release's number."""
    request = evaluator_pb2.ListReleasesRequest()
    answer = releases_json(services.evaluator.ListReleases(request, timeout=settings.rpc_timeout_s))
    for release in answer["releases"]:
        for entry in release["report"]:
            entry["slices"].pop("owner", None)  # the accounts behind a benchmark are the operator's to see
    return answer


def releases_json(response: evaluator_pb2.ListReleasesResponse) -> dict[str, Any]:
    """`{releases, current}`: current is null before the first release."""
    return {
        "releases": [message_json(release) for release in response.releases],
        "current": response.current if response.HasField("current") else None,
    }
