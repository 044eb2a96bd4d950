"""/query: one read-only SELECT over the caller's own rows, in DuckDB (see `stash_gateway.query`)."""

from __future__ import annotations

import orjson
from fastapi import APIRouter, HTTPException
from fastapi.responses import Response
from pydantic import Field

from stash_gateway.openapi import RequestBody
from stash_gateway.query.limits import MAX_SQL_CHARS, QueryTimeout
from stash_gateway.rate_limits import QueryReader
from stash_gateway.routes import API_PREFIX
from stash_gateway.state import Queries

router = APIRouter(prefix=API_PREFIX, tags=["query"])


class QueryBody(RequestBody):
    """`{sql}`: exactly one SELECT statement."""

    sql: str = Field(min_length=1, max_length=MAX_SQL_CHARS)


@router.post(
    "/query",
    summary="Run one read-only SELECT over the caller's own data",
    responses={408: {"description": "the query ran past the time limit"}, 422: {"description": "refused or failed"}},
)
def run_query(queries: Queries, body: QueryBody, principal: QueryReader) -> Response:
    """`{columns: [{name, type}], rows, truncated}` from the tables traces, steps, annotations, scores,
    action_scores, step_labels, evaluations and process_patterns, which hold only the caller's rows."""
    try:
        result = queries.run(principal.user_id, body.sql)
    except QueryTimeout as error:
        raise HTTPException(408, detail=str(error)) from None
    return Response(orjson.dumps(result.as_json()), media_type="application/json")
