"""The evaluation worker: claims queued revisions, evaluates them, and sweeps for anything missed.

Announcements queue a row and wake the worker (in-process in the embedded profile, a Redis stream
in the cluster one, so any replica may pick it up). The database row is the truth: the periodic
sweep reads ingest's list of changed revisions from a saved cursor and queues any revision without
an evaluation.

The worker claims queued evaluations in batches (owners in turns): it reads their revisions from ingest
in slices of a few dozen (one call per owner in a slice), the next slice while it evaluates the one already
read, and saves a batch's results in one transaction (a trace whose next revision is in the same batch
waits for the next round, so it reuses the labels this one keeps).

A claimed evaluation is leased: while a worker runs it, the worker's `LeaseKeeper` renews it every
few seconds, and every live worker puts back in the queue any running evaluation whose lease ran out,
so an evaluation whose labeler died (kill -9, a lost pod) is evaluated again within seconds.

Ingest is reached through a `TraceSource`, whose failures are `stash_common.errors`: this module
decides what an outage or a deleted trace means for the queue without knowing the transport.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
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
from stash_labeler.evaluation import KeptLabel, evaluate
from stash_labeler.labeling.protocol import Labeler, LabelingError
from stash_labeler.prm import Finding, ProcessModel
from stash_labeler.scoring.grading import Grader
from stash_labeler.traces import LabelerTrace, RevisionRead, TraceRevision, TraceSource

log = structlog.get_logger()
WAKEUP_TOPIC = "labeler.evaluations"
SWEEP_CURSOR = "ingest.revisions"
CLAIM_BATCH = 100
MAX_ATTEMPTS = 3
READ_SLICE = 25  # revisions read from ingest in one call (per owner): the next slice is read while one is evaluated


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
        self._fetcher = ThreadPoolExecutor(1, thread_name_prefix="evaluation-reader")

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
        self._fetcher.shutdown(wait=False, cancel_futures=True)

    def wake(self) -> None:
        """Tell every replica that an evaluation was queued."""
        self._loop.wake()

    def drain(self) -> int:
        """Evaluate queued revisions until none is left, a batch at a time; returns how many were evaluated.

        Raises Unavailable, with the revisions in hand queued again, when ingest is out of reach:
        the loop tries again after a backoff.
        """
        done = 0
        while not self._stopping.is_set():
            with transaction(self.sessions) as session:
                candidates = store.queued_ids(session, CLAIM_BATCH)
                claimed = store.claim(session, candidates)
            if not candidates:
                return done
            with self.leases.holding(*(item.evaluation_id for item in claimed)):
                self.run_batch(claimed)
            done += len(claimed)
        return done

    def sweep(self) -> int:
        """Queue revisions that have no evaluation; returns how many were queued (the leases revive abandoned ones)."""
        queued = 0
        with transaction(self.sessions) as session:
            cursor = store.load_cursor(session, SWEEP_CURSOR)
        while True:
            page = self.traces.changed_revisions(cursor, self.config.page_size)
            by_owner: dict[str, list[tuple[str, int]]] = {}
            for item in page.revisions:
                by_owner.setdefault(item.owner_id, []).append((item.trace_id, item.revision))
            with transaction(self.sessions) as session:
                new = {owner: store.enqueue_revisions(session, owner, items) for owner, items in by_owner.items()}
                store.save_cursor(session, SWEEP_CURSOR, page.next_cursor)
                store.touch_owners(session, [owner_id for owner_id, count in new.items() if count])
            queued += sum(new.values())
            if page.next_cursor == cursor or not page.revisions:
                break
            cursor = page.next_cursor
        if queued:
            log.info("labeler sweep", queued=queued)
        return queued

    def run_batch(self, claimed: Sequence[store.Claimed]) -> None:
        """Evaluate claimed revisions and save what each came to, a trace at most once per round.

        Raises Unavailable, with the revisions not yet evaluated queued again, when ingest could not be reached.
        """
        rounds = _rounds(claimed)
        for number, batch in enumerate(rounds):
            try:
                self._run_round(batch)
            except Unavailable:
                self._requeue([item for later in rounds[number + 1 :] for item in later])
                raise

    def _run_round(self, claimed: Sequence[store.Claimed]) -> None:
        """Evaluate revisions of distinct traces (read from ingest a slice at a time) and save them in one
        transaction."""
        with transaction(self.sessions) as session:
            kept = store.kept_labels_of(session, [item.revision.trace_id for item in claimed])
        slices = [claimed[start : start + READ_SLICE] for start in range(0, len(claimed), READ_SLICE)]
        evaluated: list[store.Evaluated] = []
        done = 0
        try:
            for items, traces in zip(slices, self._fetcher.map(self._read, slices), strict=True):
                for item, trace in zip(items, traces, strict=True):
                    outcome = self._evaluate(item, trace, kept.get(item.revision.trace_id, {}))
                    if outcome is not None:
                        evaluated.append(outcome)
                    done += 1
        except Unavailable:
            self._save(evaluated)
            self._requeue(claimed[done:])
            raise
        self._save(evaluated)

    def _read(self, items: Sequence[store.Claimed]) -> Sequence[RevisionRead | Exception]:
        """The claimed revisions from ingest, each with the error that stopped reading it (for `_evaluate` to
        judge): a failed call is the error of every revision it asked for."""
        try:
            return self.traces.trace_revisions([item.revision for item in items])
        except Exception as error:
            return [error] * len(items)

    def _evaluate(
        self, item: store.Claimed, trace: RevisionRead | Exception, kept: Mapping[str, KeptLabel]
    ) -> store.Evaluated | None:
        """The evaluation to save, or None with what stopped it recorded.

        Raises Unavailable when ingest could not be reached.
        """
        claimed = item.revision
        try:
            if isinstance(trace, Exception):
                raise trace
            evaluation = evaluate(trace, self.labeler, kept, self.grader)
        except NotFound:
            self._forget(claimed)
            return None
        except FailedPrecondition:
            self._fail(item.evaluation_id, f"revision {claimed.revision} was superseded before it was evaluated")
            return None
        except Unavailable:
            raise
        except (StashError, LabelingError) as error:
            self._fail(item.evaluation_id, str(error))
            return None
        except Exception as error:  # a bug must not leave the row running forever
            log.exception("evaluation failed", trace_id=claimed.trace_id, revision=claimed.revision)
            self._fail(item.evaluation_id, f"{type(error).__name__}: {error}")
            return None
        findings = self._findings(trace)
        evaluation.body["process_patterns"] = [finding.as_json() for finding in findings]
        return store.Evaluated(item.evaluation_id, trace, evaluation, findings)

    def _save(self, evaluated: Sequence[store.Evaluated]) -> None:
        if not evaluated:
            return
        with transaction(self.sessions) as session:
            saved = store.save_evaluations(session, evaluated)
            for item in saved:
                correct_otlp_trace(session, item.trace, item.findings)
            store.touch_owners(session, [item.trace.owner_id for item in saved])
        for item in saved:
            evaluation = item.evaluation
            log.info(
                "trace evaluated",
                pid=os.getpid(),  # which of the labeler's evaluation processes (STASH_LABELER_EVALUATION_PROCESSES)
                trace_id=item.trace.id,
                revision=item.trace.revision,
                labeler=evaluation.labeler.value,
                labeled=len(evaluation.labeled_now),
                score=evaluation.trace_score,
                outcome=evaluation.outcome,
            )

    def _requeue(self, claimed: Sequence[store.Claimed]) -> None:
        if claimed:
            with transaction(self.sessions) as session:
                for item in claimed:
                    store.requeue(session, item.evaluation_id)

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


def _rounds(claimed: Sequence[store.Claimed]) -> list[list[store.Claimed]]:
    """The claimed evaluations in rounds of distinct traces, in order: a later revision of a trace evaluated
    in an earlier round reuses the labels that round kept."""
    rounds: list[list[store.Claimed]] = []
    round_of: dict[str, int] = {}
    for item in claimed:
        number = round_of.get(item.revision.trace_id, -1) + 1
        if number == len(rounds):
            rounds.append([])
        rounds[number].append(item)
        round_of[item.revision.trace_id] = number
    return rounds
