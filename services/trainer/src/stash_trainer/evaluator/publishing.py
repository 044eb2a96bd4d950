"""The shared evaluator's background loop: publish releases and rollbacks to the scorer until it acknowledges
each, in order, and start the scheduled candidates.

A publication stays pending until the scorer answered it, so a scorer that is down or restarting loses
nothing: the loop retries with back-off (`QueueLoop`), and a refusal is logged and retried the same way,
holding back the later publications so that the scorer never sees them out of order.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Protocol

import structlog
from sqlalchemy.orm import Session, sessionmaker

from stash_common.coordination import Wakeups
from stash_common.db import transaction, utc_now
from stash_common.queue_loop import QueueLoop
from stash_trainer.evaluator import releases
from stash_trainer.evaluator.store import PublicationRow, ReleaseRow

log = structlog.get_logger()
TOPIC = "trainer.evaluator"


class ReleasePublisher(Protocol):
    """Where releases go (the scorer, through `stash_trainer.clients`)."""

    def publish_release(self, number: int, job_key: str, released_at: datetime) -> None:
        """Tell the scorer a release took effect; `Unavailable` while it is out of reach, else a refusal."""
        ...


class ReleaseLoop:
    """Publishes pending publications after every wake-up and sweep; the sweep also starts scheduled candidates."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        scorer: ReleasePublisher,
        wakeups: Wakeups,
        start_scheduled: Callable[[], object],
        interval_s: float,
    ) -> None:
        self.sessions = sessions
        self.scorer = scorer
        self.start_scheduled = start_scheduled  # starts the candidate the schedule says is due, if any
        self._loop = QueueLoop("evaluator-releases", wakeups, TOPIC, self.publish_pending, self.sweep, interval_s)

    def start(self) -> None:
        """Work in the background."""
        self._loop.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Finish the pass in hand and stop."""
        self._loop.stop(timeout_s)

    def wake(self) -> None:
        """A publication was recorded: publish it now."""
        self._loop.wake()

    def publish_pending(self) -> int:
        """Publish every pending publication, oldest first; returns how many the scorer acknowledged."""
        with transaction(self.sessions) as session:
            due = [(row.id, row.number, row.published_at) for row in releases.pending(session)]
            keys = {number: _job_key(session, number) for _, number, _ in due}
        for publication_id, number, at in due:
            self.scorer.publish_release(number, keys[number], at)
            with transaction(self.sessions) as session:
                row = session.get(PublicationRow, publication_id)
                if row is not None:
                    row.acknowledged_at = utc_now()
            log.info("shared evaluator release published", release=number)
        return len(due)

    def sweep(self) -> None:
        """Publish what is pending, then start a candidate when the schedule says one is due."""
        self.publish_pending()
        self.start_scheduled()


def _job_key(session: Session, number: int) -> str:
    row = session.get(ReleaseRow, number)
    if row is None:
        raise AssertionError(f"a publication names release {number}, which is not recorded")
    return row.job_key
