"""What a reviewer gets on each id route of the REST API, shared by the embedded and the cluster walks."""

from __future__ import annotations

# A reviewer who sees the trace: reads and annotating succeed, the owner's actions on it are 403 (with the
# reason), and everything else that takes an id (the owner's models, runs, keys) stays 404.
VISIBLE_TO_REVIEWER = {
    "GET /api/v1/rm/traces/{trace_id}": 200,
    "DELETE /api/v1/rm/traces/{trace_id}": 403,
    "POST /api/v1/rm/traces/{trace_id}/score": 403,
    "POST /api/v1/rm/traces/{trace_id}/relabel": 403,
    "POST /api/v1/rm/traces/{trace_id}/annotations": 201,
    "GET /api/v1/rm/traces/{trace_id}/sections": 200,
    "POST /api/v1/rm/traces/{trace_id}/section-summaries": 200,
    "POST /api/v1/rm/traces/{trace_id}/completion": 200,
    # The owner's annotation: a reviewer may flag it, not change what it says or delete it.
    "PATCH /api/v1/rm/annotations/{annotation_id}": 403,
    "DELETE /api/v1/rm/annotations/{annotation_id}": 403,
}


def reviewer_status(route: str) -> int:
    """The status a reviewer of the trace gets on `METHOD path` called with the owner's ids."""
    return VISIBLE_TO_REVIEWER.get(route, 404)
