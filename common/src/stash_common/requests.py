"""What every servicer checks first: the owner a request acts for and the page it asks for.

The gateway scopes each call to the authenticated user and passes that user's id as `owner_id`;
a service never guesses an owner, so a request without one is refused rather than served unscoped.
"""

from __future__ import annotations

from typing import Protocol

from stash.rm.v1 import common_pb2
from stash_common.errors import InvalidArgument

DEFAULT_PAGE_LIMIT = 50
PAGE_LIMIT_MAX = 500


class OwnedRequest(Protocol):
    """Any request message that carries the owner it acts for."""

    @property
    def owner_id(self) -> str: ...


def owner_of(request: OwnedRequest) -> str:
    """The request's owner id; INVALID_ARGUMENT when it names none."""
    if not request.owner_id:
        raise InvalidArgument("owner_id", "every request must name the owner it acts for")
    return request.owner_id


def page_of(page: common_pb2.PageRequest) -> tuple[int, int]:
    """(limit, offset) of a page request: limit 1…500 (unset: 50), offset at least 0."""
    limit = page.limit or DEFAULT_PAGE_LIMIT
    if not 1 <= limit <= PAGE_LIMIT_MAX or page.offset < 0:
        raise InvalidArgument("limit", f"limit must be 1 to {PAGE_LIMIT_MAX} and offset at least 0")
    return limit, page.offset
