"""The shared evaluator's releases: the trainer publishes each release and each rollback; the scorer records
it and, when the current release changes, has the background rescore every trace with it.

A release names the training job that left its checkpoint (`jobs/trainer/<job id>`). The scorer finds the
checkpoint archive the first time a number is published: the archive of the personal model whose training
job published its scores under that key, else the archive the job's own `job.json` names (`archive_key`)
while the job's files are still stored. A number keeps that checkpoint for good, so a rollback (publishing
an earlier number again) needs nothing but the number.

The current release is the one released last (the latest `released_at`): publishing the same release again,
or a late copy of an older publication, changes nothing. When the current release changes, queued runs of
other releases are dropped and its backfill queues every trace it has not scored at the trace's current
revision; every release keeps the scores it published, so a rollback shows at once what the earlier
release had scored, and a trace shows the previous release's scores until the new one has scored it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import structlog
from sqlalchemy.orm import Session, sessionmaker

from stash_common.db import transaction
from stash_common.errors import FailedPrecondition, InvalidArgument, StashError
from stash_common.jobs import training_scores
from stash_common.storage import ObjectStore
from stash_scorer import store

log = structlog.get_logger()


@dataclass(frozen=True)
class Release:
    """One publication of a release: its number, the training job that left its checkpoint, and when it took
    effect."""

    number: int
    job_key: str
    released_at: datetime

    def __post_init__(self) -> None:
        if self.number < 1:
            raise InvalidArgument("number", f"a release number is 1 or more, not {self.number}")
        if not self.job_key:
            raise InvalidArgument(
                "job_key", "name the training job whose checkpoint is the release (jobs/trainer/<job id>)"
            )
        training_scores.training_job_id(self.job_key)


class Releases:
    """Records publications and switches the shared scoring to the current release."""

    def __init__(self, sessions: sessionmaker[Session], objects: ObjectStore, wake: Callable[[], None]) -> None:
        self.sessions = sessions
        self.objects = objects  # where training jobs leave their files and checkpoints
        self.wake = wake

    def publish(self, release: Release) -> None:
        """Record the publication; when the current release changed, rescore every trace with it."""
        artifact_key, dropped = self._checkpoint(release), 0
        with transaction(self.sessions) as session:
            before = store.current_release(session)
            row = store.find_release(session, release.number)
            if row is None:
                row = store.EvaluatorReleaseRow(
                    number=release.number,
                    job_key=release.job_key,
                    artifact_key=artifact_key,
                    released_at=release.released_at,
                )
                session.add(row)
            row.released_at = max(row.released_at, release.released_at)
            session.flush()
            current = store.current_release(session)
            switched = current is not None and (before is None or before.number != current.number)
            if current is not None and switched:
                current.backfilled_at = None
                dropped = store.retire_release_runs(session, current.number)
        if switched:
            log.info("shared evaluator release is current", release=release.number, dropped_runs=dropped)
            self.wake()

    def _checkpoint(self, release: Release) -> str:
        """The release's checkpoint archive key: the one it was first published with, else found by its job key."""
        with transaction(self.sessions) as session:
            known = store.find_release(session, release.number)
            trained = store.checkpoint_of_training_job(session, release.job_key) if known is None else None
        if known is not None:
            if known.job_key != release.job_key:
                raise FailedPrecondition(
                    f"release {release.number} was published with training job {known.job_key}, not "
                    f"{release.job_key}: a release number names one checkpoint; publish a new number"
                )
            return known.artifact_key
        archive = trained or self._named_by_job(release.job_key)
        if not self.objects.exists(archive):
            raise FailedPrecondition(
                f"the checkpoint of training job {release.job_key} is missing from object storage ({archive})"
            )
        return archive

    def _named_by_job(self, job_key: str) -> str:
        try:
            archive = training_scores.training_checkpoint(self.objects, job_key)
        except (StashError, ValueError, OSError) as error:
            raise FailedPrecondition(f"the job.json of training job {job_key} is unreadable: {error}") from error
        if archive is None:
            raise FailedPrecondition(
                f"training job {job_key} is unknown: no personal model's training job published scores under it and"
                " its job.json is gone from object storage; publish a release while its training job's files exist"
            )
        return archive
