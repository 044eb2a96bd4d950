"""Background scoring: every eligible trace of an owner, by each of the owner's ready action models.

Two things queue automatic runs. When a model becomes ready, the backfill queues every trace of its
owner that the model has not scored (or is not scoring) at the trace's current revision. And the sweep
reads ingest's list of changed revisions from a saved cursor, notes each change, and acts on an owner's
changes only once that owner has made none for `debounce_s`, so a burst of imports becomes one batch
instead of a job per trace; a change never waits longer than MAX_WAIT_DEBOUNCES debounces, so an owner
whose agents never pause (live OTLP traces growing all day) is still scored. Acting on a change reads
the trace once: scores of steps it no longer has are deleted, and each ready action model gets an
automatic run unless one exists for that revision.

The shared evaluator's current release is one more model for every owner: acting on a change queues it
too, and when a release becomes current its backfill queues every trace of every owner that it has not
scored at the trace's current revision, in the order ingest last changed them (the dispatcher serves a
release's runs newest first). Both backfills list the changes younger than ingest's settle window too: the
window protects the sweep's saved cursor, and a backfill keeps none (a trace it misses is a change the
sweep acts on).

Ingest lists no deletions, so the sweep also checks, a page at a time, that the traces it holds scores
for still exist, and forgets the ones that do not. Ingest is reached through a `TraceSource`: an outage
stops the pass, and the next one resumes where it stopped.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

import structlog
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from stash_common.db import transaction, utc_now
from stash_common.errors import NotFound
from stash_scorer import store
from stash_scorer.inputs import ScorerTrace, TraceSource

log = structlog.get_logger()
CHANGES_CURSOR = "ingest.revisions"
DELETIONS_CURSOR = "scored.traces"
PAGE_SIZE = 500
MAX_WAIT_DEBOUNCES = 10


class BackgroundScoring:
    """Queues automatic runs for ready models and for changed traces, and forgets deleted traces."""

    def __init__(self, sessions: sessionmaker[Session], traces: TraceSource, debounce_s: float) -> None:
        self.sessions = sessions
        self.traces = traces
        self.debounce = timedelta(seconds=debounce_s)

    def sweep(self) -> int:
        """Read new changes, act on the idle owners' ones, and check a page of scored traces; returns runs queued."""
        self.read_changes()
        queued = self.act_on_idle_owners()
        self.forget_deleted()
        return queued

    def read_changes(self) -> int:
        """Note every revision ingest lists after the saved cursor; returns how many."""
        with transaction(self.sessions) as session:
            cursor = store.load_cursor(session, CHANGES_CURSOR)
        seen = 0
        while True:
            page = self.traces.changed_revisions(cursor, PAGE_SIZE)
            with transaction(self.sessions) as session:
                for item in page.revisions:
                    store.note_change(session, item.owner_id, item.trace_id, item.revision)
                store.save_cursor(session, CHANGES_CURSOR, page.next_cursor)
            seen += len(page.revisions)
            if not page.revisions or page.next_cursor == cursor:
                return seen
            cursor = page.next_cursor

    def act_on_idle_owners(self) -> int:
        """Act on the pending changes of every owner idle for the debounce; returns runs queued."""
        with transaction(self.sessions) as session:
            due = [(row.owner_id, row.trace_id, row.revision) for row in store.due_changes(session, *self._due_times())]
        queued = 0
        for owner_id, trace_id, revision in due:
            queued += self.act_on_change(owner_id, trace_id, revision)
        if queued:
            log.info("changed traces queued for scoring", runs=queued, traces=len(due))
        return queued

    def act_on_change(self, owner_id: str, trace_id: str, revision: int) -> int:
        """Drop the scores of removed steps and queue the trace for each ready action model; returns runs queued."""
        with transaction(self.sessions) as session:
            models = store.ready_action_models(session, owner_id)
            release = store.current_release(session)
            scored = store.has_action_scores(session, owner_id, trace_id)
        if not models and release is None and not scored:
            with transaction(self.sessions) as session:
                store.settle_change(session, trace_id, revision)
            return 0
        try:
            trace = self.traces.current_trace(owner_id, trace_id)
        except NotFound:
            self._forget(owner_id, trace_id)
            return 0
        try:
            with transaction(self.sessions) as session:
                store.drop_removed_steps(session, owner_id, trace_id, [step.id for step in trace.steps])
                queued = _enqueue(session, models, release, trace, trace.revision) if trace.actions else 0
                store.settle_change(session, trace_id, max(revision, trace.revision))
        except IntegrityError:
            return 0  # another replica queued the same run first; the change stays pending for the next sweep
        return queued

    def backfill(self) -> int:
        """Queue every trace of each newly ready action model's owner, and every trace for a newly current
        release; returns runs queued."""
        with transaction(self.sessions) as session:
            models = store.models_to_backfill(session)
            release = store.release_to_backfill(session)
        queued = 0
        for model in models:
            queued += self._backfill(model)
        if release is not None:
            queued += self._backfill_release(release)
        return queued

    def _backfill_release(self, release: store.EvaluatorReleaseRow) -> int:
        with transaction(self.sessions) as session:
            covered = store.covered_revisions(session, release.model_id)
        cursor, queued = "", 0
        try:
            while True:
                page = self.traces.changed_revisions(cursor, PAGE_SIZE, include_unsettled=True)
                fresh = [item for item in page.revisions if (item.trace_id, item.revision) not in covered]
                with transaction(self.sessions) as session:
                    session.add_all(
                        store.new_release_run(release, item.owner_id, item.trace_id, item.revision) for item in fresh
                    )
                queued += len(fresh)
                if not page.revisions or page.next_cursor == cursor:
                    break
                cursor = page.next_cursor
        except IntegrityError:
            return queued  # a change queued one of them meanwhile; the next pass finishes the backfill
        with transaction(self.sessions) as session:
            store.finish_release_backfill(session, release.number)
        log.info("shared evaluator release queued for every trace", release=release.number, runs=queued)
        return queued

    def _backfill(self, model: store.ScoringModelRow) -> int:
        with transaction(self.sessions) as session:
            covered = store.covered_revisions(session, model.id)
        cursor, queued = "", 0
        try:
            while True:
                page = self.traces.changed_revisions(cursor, PAGE_SIZE, owner_id=model.owner_id, include_unsettled=True)
                # A failed run does not cover its revision here: a newly ready model scores every trace anew.
                fresh = [item for item in page.revisions if (item.trace_id, item.revision) not in covered]
                with transaction(self.sessions) as session:
                    session.add_all(
                        store.new_run(model, item.trace_id, item.revision, explicit=False) for item in fresh
                    )
                queued += len(fresh)
                if not page.revisions or page.next_cursor == cursor:
                    break
                cursor = page.next_cursor
        except IntegrityError:
            return queued  # a concurrent request queued one of them; the next pass finishes the backfill
        with transaction(self.sessions) as session:
            row = session.get(store.ScoringModelRow, model.id)
            if row is not None:
                row.backfilled_at = utc_now()
        log.info("ready model queued for its owner's traces", reward_model_id=model.id, runs=queued)
        return queued

    def forget_deleted(self) -> int:
        """Forget the deleted ones among the next page of scored traces; returns how many were forgotten."""
        with transaction(self.sessions) as session:
            after = store.load_cursor(session, DELETIONS_CURSOR)
            page = store.scored_traces_after(session, after, PAGE_SIZE)
        by_owner: dict[str, list[str]] = {}
        for owner_id, trace_id in page:
            by_owner.setdefault(owner_id, []).append(trace_id)
        forgotten = 0
        for owner_id, trace_ids in by_owner.items():
            forgotten += self._forget_missing(owner_id, trace_ids)
        with transaction(self.sessions) as session:
            store.save_cursor(session, DELETIONS_CURSOR, page[-1][1] if len(page) == PAGE_SIZE else "")
        return forgotten

    def _forget_missing(self, owner_id: str, trace_ids: Sequence[str]) -> int:
        missing = set(trace_ids) - self.traces.existing(owner_id, trace_ids)
        for trace_id in missing:
            self._forget(owner_id, trace_id)
        return len(missing)

    def _due_times(self) -> tuple[datetime, datetime]:
        """(idle since, waiting since): an owner idle since the first, or waiting since the second, is due."""
        now = utc_now()
        return now - self.debounce, now - MAX_WAIT_DEBOUNCES * self.debounce

    def _forget(self, owner_id: str, trace_id: str) -> None:
        with transaction(self.sessions) as session:
            store.forget_trace(session, owner_id, trace_id)
        log.info("deleted trace forgotten", trace_id=trace_id)


def _enqueue(
    session: Session,
    models: Sequence[store.ScoringModelRow],
    release: store.EvaluatorReleaseRow | None,
    trace: ScorerTrace,
    revision: int,
) -> int:
    """Queue an automatic run of the revision for each model, and the current release, that has none; returns
    how many."""
    queued = 0
    for model in models:
        if not store.has_run(session, trace.id, model.id, revision):
            session.add(store.new_run(model, trace.id, revision, explicit=False))
            queued += 1
    if release is not None and not store.has_run(session, trace.id, release.model_id, revision):
        session.add(store.new_release_run(release, trace.owner_id, trace.id, revision))
        queued += 1
    return queued
