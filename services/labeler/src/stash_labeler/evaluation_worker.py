"""The evaluation worker: claims queued revisions, evaluates them, and sweeps for anything missed.

Announcements queue a row and wake the worker (in-process in the embedded profile, a Redis stream
in the cluster one, so any replica may pick it up). The database row is the truth: the periodic
sweep reads ingest's list of changed revisions from a saved cursor and queues any revision without
an evaluation.

A claimed evaluation is leased: while a worker runs it, the worker's `LeaseKeeper` renews it every
few seconds, and every live worker puts back in the queue any running evaluation whose lease ran out,
so an evaluation whose labeler died (kill -9, a lost pod) is evaluated again within seconds.

Ingest is reached through a `TraceSource`, whose failures are `stash_common.errors`: this module
decides what an outage or a deleted trace means for the queue without knowing the transport.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import structlog
from sqlalchemy.orm import Session, sessionmaker

from stash_common.coordination import Wakeups
from stash_common.db import transaction
from stash_common.errors import FailedPrecondition, NotFound, StashError, Unavailable
from stash_common.leases import LeaseKeeper
from stash_common.queue_loop import QueueLoop
from stash_labeler import store
from stash_labeler.correction_ledger import correct_otlp_trace
from stash_labeler.evaluation import evaluate
from stash_labeler.labeling.protocol import Labeler, LabelingError
from stash_labeler.prm import Finding, ProcessModel
from stash_labeler.scoring.grading import Grader
from stash_labeler.traces import LabelerTrace, TraceRevision, TraceSource

log = structlog.get_logger()
WAKEUP_TOPIC = "labeler.evaluations"
SWEEP_CURSOR = "ingest.revisions"
CLAIM_BATCH = 20
MAX_ATTEMPTS = 3


@dataclass(frozen=True)
class WorkerConfig:
    """How often the worker sweeps, and how long a running evaluation's lease lasts without renewal."""

    sweep_interval_s: float = 30.0
    lease_s: float = 6.0
    page_size: int = 500


class EvaluationWorker:
    """Evaluates queued trace revisions on a background thread."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        traces: TraceSource,
        labeler: Labeler,
        wakeups: Wakeups,
        config: WorkerConfig = WorkerConfig(),
        grader: Grader | None = None,
        process_model: ProcessModel | None = None,
    ) -> None:
        self.sessions = sessions
        self.traces = traces
        self.labeler = labeler
        self.grader = grader
        self.wakeups = wakeups
        self.config = config
        self.process_model = process_model or ProcessModel()
        self._loop = QueueLoop(
            "evaluation-worker", wakeups, WAKEUP_TOPIC, self.drain, self.sweep, config.sweep_interval_s
        )
        self._stopping = self._loop.stopping
        self.leases = LeaseKeeper("evaluation-leases", config.lease_s, self._renew_leases, self.reclaim_expired)

    def _renew_leases(self, evaluation_ids: list[str]) -> None:
        with transaction(self.sessions) as session:
            store.renew_leases(session, evaluation_ids)

    def reclaim_expired(self) -> int:
        """Queue again the running evaluations whose lease ran out (their worker died); returns how many."""
        with transaction(self.sessions) as session:
            revived = store.requeue_stale(session, timedelta(seconds=self.config.lease_s), MAX_ATTEMPTS)
        if revived:
            log.info("evaluations of a stopped worker queued again", revived=revived)
            self.wake()
        return revived

    def start(self) -> None:
        """Work in the background."""
        self.leases.start()
        self._loop.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Finish the evaluation in hand and stop."""
        self._loop.stop(timeout_s)
        self.leases.stop()

    def wake(self) -> None:
        """Tell every replica that an evaluation was queued."""
        self._loop.wake()

    def drain(self) -> int:
        """Evaluate queued revisions until none is left; returns how many were evaluated.

        Raises Unavailable, with the revision in hand queued again, when ingest is out of reach:
        the loop tries again after a backoff.
        """
        done = 0
        while not self._stopping.is_set():
            with transaction(self.sessions) as session:
                candidates = store.queued_ids(session, CLAIM_BATCH)
            if not candidates:
                return done
            for evaluation_id in candidates:
                with transaction(self.sessions) as session:
                    won = store.claim(session, evaluation_id)
                if won:
                    with self.leases.holding(evaluation_id):
                        self.run_one(evaluation_id)
                    done += 1
        return done

    def sweep(self) -> int:
        """Queue revisions that have no evaluation; returns how many were queued (the leases revive abandoned ones)."""
        queued = 0
        with transaction(self.sessions) as session:
            cursor = store.load_cursor(session, SWEEP_CURSOR)
        while True:
            page = self.traces.changed_revisions(cursor, self.config.page_size)
            with transaction(self.sessions) as session:
                new = [
                    item
                    for item in page.revisions
                    if store.enqueue(session, item.owner_id, item.trace_id, item.revision)
                ]
                store.save_cursor(session, SWEEP_CURSOR, page.next_cursor)
                store.touch_owners(session, [item.owner_id for item in new])
            queued += len(new)
            if page.next_cursor == cursor or not page.revisions:
                break
            cursor = page.next_cursor
        if queued:
            log.info("labeler sweep", queued=queued)
        return queued

    def run_one(self, evaluation_id: str) -> None:
        """Evaluate one claimed revision and save the result or the error that stopped it.

        Raises Unavailable, with the revision queued again, when ingest could not be reached.
        """
        with transaction(self.sessions) as session:
            claimed = store.revision_of(session, evaluation_id)
            if claimed is None:
                return  # the trace was deleted since the claim, and its evaluations with it
            kept = store.kept_labels(session, claimed.trace_id)
        try:
            trace = self.traces.trace_revision(claimed.owner_id, claimed.trace_id, claimed.revision)
            evaluation = evaluate(trace, self.labeler, kept, self.grader)
        except NotFound:
            self._forget(claimed)
            return
        except FailedPrecondition:
            self._fail(evaluation_id, f"revision {claimed.revision} was superseded before it was evaluated")
            return
        except Unavailable:
            with transaction(self.sessions) as session:
                store.requeue(session, evaluation_id)
            raise
        except (StashError, LabelingError) as error:
            self._fail(evaluation_id, str(error))
            return
        except Exception as error:  # a bug must not leave the row running forever
            log.exception("evaluation failed", trace_id=claimed.trace_id, revision=claimed.revision)
            self._fail(evaluation_id, f"{type(error).__name__}: {error}")
            return
        findings = self._findings(trace)
        evaluation.body["process_patterns"] = [finding.as_json() for finding in findings]
        with transaction(self.sessions) as session:
            if store.save_evaluation(session, evaluation_id, trace, evaluation):
                store.replace_findings(session, trace, findings)
                correct_otlp_trace(session, trace, findings)
                store.touch_owners(session, [trace.owner_id])
        log.info(
            "trace evaluated",
            trace_id=trace.id,
            revision=trace.revision,
            labeler=evaluation.labeler.value,
            labeled=len(evaluation.labeled_now),
            score=evaluation.trace_score,
            outcome=evaluation.outcome,
        )

    def _findings(self, trace: LabelerTrace) -> list[Finding]:
        try:
            return self.process_model.trace_findings(trace)
        except Exception:  # the PRM is advisory: it never fails an evaluation
            log.exception("process patterns failed", trace_id=trace.id, revision=trace.revision)
            return []

    def _forget(self, gone: TraceRevision) -> None:
        with transaction(self.sessions) as session:
            store.forget_trace(session, gone.trace_id)

    def _fail(self, evaluation_id: str, error: str) -> None:
        with transaction(self.sessions) as session:
            store.fail(session, evaluation_id, error)
