"""The Announcer: announcements leave in the background a batch of one owner's at a time, a failed one never stops
the next, owners take turns."""

import queue
import threading
from collections.abc import Sequence

from stash_common.db import utc_now
from stash_common.errors import Unavailable
from stash_ingest.revisions import ANNOUNCE_BATCH, Announcer, Revision


def _revision(trace_id: str, owner_id: str = "owner") -> Revision:
    return Revision(owner_id=owner_id, trace_id=trace_id, revision=1, updated_at=utc_now())


def test_announcer_keeps_announcing_after_a_failed_send() -> None:
    sent: queue.SimpleQueue[list[str]] = queue.SimpleQueue()

    def send(revisions: Sequence[Revision]) -> None:
        sent.put([revision.trace_id for revision in revisions])
        if revisions[0].trace_id == "down":
            raise Unavailable("the labeler did not take the announcement: UNAVAILABLE")

    announcer = Announcer(send)
    announcer.announce([_revision("down")])
    assert sent.get(timeout=5) == ["down"]
    announcer.announce([_revision("after")])

    assert sent.get(timeout=5) == ["after"]


def test_a_second_owner_is_announced_next_however_many_the_first_queued() -> None:
    sent: queue.SimpleQueue[list[str]] = queue.SimpleQueue()
    first_sent = threading.Event()
    release = threading.Event()

    def send(revisions: Sequence[Revision]) -> None:
        sent.put([revision.trace_id for revision in revisions])
        first_sent.set()
        release.wait(5)  # the first send is in flight while both owners' revisions queue up

    announcer = Announcer(send)
    announcer.announce([_revision("big-0", "big")])
    assert first_sent.wait(5)
    backlog = [f"big-{n}" for n in range(1, 2 * ANNOUNCE_BATCH + 2)]
    announcer.announce([_revision(trace_id, "big") for trace_id in backlog])
    announcer.announce([_revision("small-0", "small"), _revision("small-1", "small")])
    release.set()

    turns = [sent.get(timeout=5) for _ in range(5)]
    assert turns == [
        ["big-0"],
        backlog[:ANNOUNCE_BATCH],
        ["small-0", "small-1"],
        backlog[ANNOUNCE_BATCH : 2 * ANNOUNCE_BATCH],
        backlog[2 * ANNOUNCE_BATCH :],
    ]
