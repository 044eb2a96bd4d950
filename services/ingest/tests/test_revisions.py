"""The Announcer: announcements leave in the background, and a failed one never stops the next."""

import queue

from stash_common.db import utc_now
from stash_common.errors import Unavailable
from stash_ingest.revisions import Announcer, Revision


def _revision(trace_id: str) -> Revision:
    return Revision(owner_id="owner", trace_id=trace_id, revision=1, updated_at=utc_now())


def test_announcer_keeps_announcing_after_a_failed_send() -> None:
    sent: queue.SimpleQueue[str] = queue.SimpleQueue()

    def send(revision: Revision) -> None:
        sent.put(revision.trace_id)
        if revision.trace_id == "down":
            raise Unavailable("the labeler did not take the announcement: UNAVAILABLE")

    Announcer(send).announce([_revision("down"), _revision("after")])

    assert [sent.get(timeout=5), sent.get(timeout=5)] == ["down", "after"]
