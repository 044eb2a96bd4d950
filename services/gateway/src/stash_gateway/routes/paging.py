"""`?limit=&offset=` of the list routes, bounded as every service bounds a page.

The bounds are `stash_common.requests`' own, so the REST API answers 422 for exactly the pages a
service would refuse, before any call is made.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Query

from stash.rm.v1 import common_pb2
from stash_common.requests import DEFAULT_PAGE_LIMIT, PAGE_LIMIT_MAX

PAGE_OFFSET_MAX = 2**31 - 1  # PageRequest.offset is an int32


def page_request(
    limit: Annotated[int, Query(ge=1, le=PAGE_LIMIT_MAX)] = DEFAULT_PAGE_LIMIT,
    offset: Annotated[int, Query(ge=0, le=PAGE_OFFSET_MAX)] = 0,
) -> common_pb2.PageRequest:
    """The page a list route asks for, as every list RPC takes it."""
    return common_pb2.PageRequest(limit=limit, offset=offset)


Page = Annotated[common_pb2.PageRequest, Depends(page_request)]
