"""The Announcer: announcements leave in the background, a failed one never stops the next, owners take turns."""

import queue
import threading

from stash_common.db import utc_now
from stash_common.errors import Unavailable
from stash_ingest.revisions import Announcer, Revision


def _revision(trace_id: str, owner_id: str = "owner") -> Revision:
    return Revision(owner_id=owner_id, trace_id=trace_id, revision=1, updated_at=utc_now())


def test_announcer_keeps_announcing_after_a_failed_send() -> None:
    sent: queue.SimpleQueue[str] = queue.SimpleQueue()

    def send(revision: Revision) -> None:
        sent.put(revision.trace_id)
        if revision.trace_id == "down":
            raise Unavailable("the labeler did not take the announcement: UNAVAILABLE")

    Announcer(send).announce([_revision("down"), _revision("after")])

    assert [sent.get(timeout=5), sent.get(timeout=5)] == ["down", "after"]


def test_a_second_owner_is_announced_next_however_many_the_first_queued() -> None:
    sent: queue.SimpleQueue[str] = queue.SimpleQueue()
    first_sent = threading.Event()
    release = threading.Event()

    def send(revision: Revision) -> None:
        sent.put(revision.trace_id)
        first_sent.set()
        release.wait(5)  # the first send is in flight while both owners' revisions queue up

    announcer = Announcer(send)
    announcer.announce([_revision("big-0", "big")])
    assert first_sent.wait(5)
    announcer.announce([_revision(f"big-{n}", "big") for n in range(1, 1000)])
    announcer.announce([_revision("small-0", "small")])
    release.set()

    assert [sent.get(timeout=5) for _ in range(4)] == ["big-0", "big-1", "small-0", "big-2"]
