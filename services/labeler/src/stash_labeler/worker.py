"""The evaluation worker: claims queued revisions, evaluates them, and sweeps for anything missed.

Announcements queue a row and wake the worker (in-process in the embedded profile, a Redis stream
in the cluster one, so any replica may pick it up). The database row is the truth: the periodic
sweep reads ingest's list of changed revisions from a saved cursor and queues any revision without
an evaluation, and it puts evaluations left running by a crashed worker back in the queue.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import grpc
import structlog
from sqlalchemy.orm import Session, sessionmaker

from stash.rm.v1 import ingest_pb2
from stash_common.coordination import Wakeups
from stash_common.db import transaction, utc_now
from stash_common.queue_loop import QueueLoop
from stash_labeler import store
from stash_labeler.evaluate import Evaluation, Grader, KeptLabel, evaluate
from stash_labeler.labeling import ChunkLabel, Labeler, LabelingError
from stash_labeler.labels import LabelSource, StepLabel
from stash_labeler.process import Finding, ProcessModel, correct_otlp_trace, save_findings
from stash_labeler.traces import LabelerTrace, trace_from_proto

log = structlog.get_logger()
WAKEUP_TOPIC = "labeler.evaluations"
SWEEP_CURSOR = "ingest.revisions"
CLAIM_BATCH = 20
MAX_ATTEMPTS = 3
_OUT_OF_REACH = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


@dataclass(frozen=True)
class WorkerConfig:
    """How often the worker sweeps and when a running evaluation counts as abandoned."""

    sweep_interval_s: float = 30.0
    stale_after: timedelta = timedelta(minutes=10)
    page_size: int = 500


class EvaluationWorker:
    """Evaluates queued trace revisions on a background thread."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        ingest: Any,
        labeler: Labeler,
        wakeups: Wakeups,
        config: WorkerConfig = WorkerConfig(),
        grader: Grader | None = None,
        process_model: ProcessModel | None = None,
    ) -> None:
        self.sessions = sessions
        self.ingest = ingest
        self.labeler = labeler
        self.grader = grader
        self.wakeups = wakeups
        self.config = config
        self.process_model = process_model or ProcessModel()
        self._loop = QueueLoop(
            "evaluation-worker", wakeups, WAKEUP_TOPIC, self.drain, self.sweep, config.sweep_interval_s
        )
        self._stopping = self._loop.stopping

    def start(self) -> None:
        """Work in the background."""
        self._loop.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Finish the evaluation in hand and stop."""
        self._loop.stop(timeout_s)

    def wake(self) -> None:
        """Tell every replica that an evaluation was queued."""
        self._loop.wake()

    def drain(self) -> int:
        """Evaluate queued revisions until none is left; returns how many were evaluated."""
        done = 0
        while not self._stopping.is_set():
            with transaction(self.sessions) as session:
                candidates = store.queued_ids(session, CLAIM_BATCH)
            if not candidates:
                return done
            for evaluation_id in candidates:
                with transaction(self.sessions) as session:
                    won = store.claim(session, evaluation_id)
                if won and not self.run_one(evaluation_id):
                    return done  # ingest is out of reach: the sweep or the next wake-up tries again
                done += won
        return done

    def sweep(self) -> int:
        """Queue revisions that have no evaluation and revive abandoned ones; returns how many were queued."""
        queued = 0
        with transaction(self.sessions) as session:
            revived = store.requeue_stale(session, self.config.stale_after, MAX_ATTEMPTS)
            cursor = store.load_cursor(session, SWEEP_CURSOR)
        while True:
            page = self.ingest.ListTraceRevisions(
                ingest_pb2.ListTraceRevisionsRequest(cursor=cursor, limit=self.config.page_size), timeout=30
            )
            with transaction(self.sessions) as session:
                for item in page.revisions:
                    queued += store.enqueue(session, item.owner_id, item.trace_id, item.revision)
                store.save_cursor(session, SWEEP_CURSOR, page.next_cursor)
            if page.next_cursor == cursor or not page.revisions:
                break
            cursor = page.next_cursor
        if queued or revived:
            log.info("labeler sweep", queued=queued, revived=revived)
        return queued

    def run_one(self, evaluation_id: str) -> bool:
        """Evaluate one claimed revision and save the result or the error that stopped it.

        Returns False, with the revision queued again, when ingest could not be reached.
        """
        with transaction(self.sessions) as session:
            row = session.get(store.EvaluationRow, evaluation_id)
            assert row is not None
            owner_id, trace_id, revision = row.owner_id, row.trace_id, row.revision
            kept = {chunk_id: _kept(item) for chunk_id, item in store.kept_labels(session, trace_id).items()}
        try:
            trace = self._fetch(owner_id, trace_id, revision)
            if trace is None:
                return True
            evaluation = evaluate(trace, self.labeler, kept, self.grader)
        except grpc.RpcError as error:
            if error.code() not in _OUT_OF_REACH:
                self._fail(evaluation_id, f"ingest answered {error.code().name}: {error.details()}")
                return True
            log.warning("ingest out of reach; evaluation queued again", trace_id=trace_id, code=error.code().name)
            with transaction(self.sessions) as session:
                store.requeue(session, session.get(store.EvaluationRow, evaluation_id))
            return False
        except LabelingError as error:
            self._fail(evaluation_id, str(error))
            return True
        except Exception as error:  # a bug must not leave the row running forever
            log.exception("evaluation failed", trace_id=trace_id, revision=revision)
            self._fail(evaluation_id, f"{type(error).__name__}: {error}")
            return True
        findings = self._findings(trace)
        evaluation.body["process_patterns"] = [finding.as_json() for finding in findings]
        with transaction(self.sessions) as session:
            _save(session, evaluation_id, trace, evaluation)
            save_findings(session, trace, findings)
            correct_otlp_trace(session, trace, findings)
        log.info(
            "trace evaluated",
            trace_id=trace_id,
            revision=revision,
            labeler=evaluation.labeler.value,
            labeled=len(evaluation.labeled_now),
            score=evaluation.trace_score,
            outcome=evaluation.outcome,
        )
        return True

    def _findings(self, trace: LabelerTrace) -> list[Finding]:
        try:
            return self.process_model.trace_findings(trace)
        except Exception:  # the PRM is advisory: it never fails an evaluation
            log.exception("process patterns failed", trace_id=trace.id, revision=trace.revision)
            return []

    def _fetch(self, owner_id: str, trace_id: str, revision: int) -> LabelerTrace | None:
        """The trace at `revision`; None (and the row settled) when it was deleted or superseded."""
        request = ingest_pb2.GetTraceRevisionRequest(owner_id=owner_id, trace_id=trace_id, revision=revision)
        try:
            response = self.ingest.GetTraceRevision(request, timeout=60)
        except grpc.RpcError as error:
            if error.code() == grpc.StatusCode.NOT_FOUND:
                with transaction(self.sessions) as session:
                    store.forget_trace(session, trace_id)
                return None
            if error.code() == grpc.StatusCode.FAILED_PRECONDITION:
                raise LabelingError(f"revision {revision} was superseded before it was evaluated") from None
            raise
        return trace_from_proto(owner_id, response.trace)

    def _fail(self, evaluation_id: str, error: str) -> None:
        with transaction(self.sessions) as session:
            row = session.get(store.EvaluationRow, evaluation_id)
            if row is not None:
                row.status, row.error, row.updated_at, row.finished_at = store.FAILED, error, utc_now(), utc_now()


def _kept(row: store.ChunkLabelRow) -> KeptLabel:
    label = ChunkLabel(StepLabel.model_validate(row.label), LabelSource(row.source), row.model, row.fingerprint)
    return KeptLabel(label, row.distribution)


def _save(session: Session, evaluation_id: str, trace: LabelerTrace, evaluation: Evaluation) -> None:
    row = session.get(store.EvaluationRow, evaluation_id)
    assert row is not None
    now = utc_now()
    row.status, row.error, row.body = store.SUCCEEDED, None, evaluation.body
    row.trace_score, row.outcome, row.labeler = evaluation.trace_score, evaluation.outcome, evaluation.labeler.value
    row.updated_at = row.finished_at = now
    if evaluation.labeler == LabelSource.IMPORTED:
        return
    existing = store.kept_labels(session, trace.id)
    for chunk_id, kept in evaluation.labels.items():
        values = {
            "owner_id": trace.owner_id,
            "fingerprint": kept.label.fingerprint,
            "label": kept.label.label.model_dump(mode="json"),
            "source": kept.label.source.value,
            "model": kept.label.model,
            "distribution": kept.distribution,
        }
        if chunk_id in existing:
            for name, value in values.items():
                setattr(existing[chunk_id], name, value)
        else:
            session.add(store.ChunkLabelRow(trace_id=trace.id, chunk_id=chunk_id, created_at=now, **values))
