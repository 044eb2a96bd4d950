"""Scoring runs: explicit requests, the workers' reports, and the scores a training job publishes.

A request for a trace and model returns what already covers the trace's current revision (the active
run, or the succeeded one of the same checkpoint) and otherwise queues an explicit run; the database
arbitrates between simultaneous requests. A worker's report is checked against the run it names and
against ingest's current revision before anything is stored: a trace that changed while it was scored
fails the run and publishes nothing, and a result that fails validation does the same. A succeeded
model's training scores go through the same check, each trace becoming a succeeded or failed run, and
make the model ready, so the background sweep scores the rest of its owner's traces; the scorer reads
them from the training job's files in object storage by the job's key (`publish_training_job`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import structlog
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from stash_common.db import transaction, utc_now
from stash_common.errors import FailedPrecondition, InvalidArgument, NotFound, StashError, Unavailable
from stash_common.jobs import training_scores
from stash_common.storage import ObjectStore
from stash_scorer import store
from stash_scorer.inputs import ModelSource, RewardModel, ScorerTrace, TraceSource
from stash_scorer.publishing import ActionResult, check_scores

log = structlog.get_logger()
CONFLICT_ATTEMPTS = 3  # a simultaneous request may insert the same run or model first; the next look finds it
T = TypeVar("T")


@dataclass(frozen=True)
class RunReport:
    """A worker's result for one trace of its job."""

    owner_id: str
    run_id: str
    job_id: str
    trace_id: str
    trace_revision: int
    succeeded: bool
    error: str | None = None
    permanent: bool = False
    actions: tuple[ActionResult, ...] = ()
    trace_score: float | None = None


@dataclass(frozen=True)
class TrainingScores:
    """The scores a training job computed for one of its selected traces, at the revision it read."""

    trace_id: str
    trace_revision: int
    trace_score: float | None
    actions: tuple[ActionResult, ...]


class Scoring:
    """Requests, reports and training publications, against the scorer's tables and its peers."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        traces: TraceSource,
        models: ModelSource,
        wake: Callable[[], None],
        objects: ObjectStore,
    ) -> None:
        self.sessions = sessions
        self.traces = traces
        self.models = models
        self.wake = wake
        self.objects = objects  # where training jobs leave their scores

    def request(self, owner_id: str, trace_id: str, model_id: str) -> store.ScoringRunRow:
        """The run covering the trace's current revision with the model: finished, active, or queued now."""
        trace = self._owned_trace(owner_id, trace_id)
        model = self._ready_model(owner_id, model_id)
        if not model.scores_actions:
            raise InvalidArgument(
                "reward_model_id",
                f"reward model {model.name} has no action scoring (metrics.action_scoring_version is null): "
                "it was trained without action comparisons; train a new model with them to score actions",
            )
        if not trace.actions:
            raise InvalidArgument("trace_id", f"trace {trace_id} has no assistant response or tool call to score")
        run = self._retrying(lambda session: self._covering_or_new(session, model, trace))
        if run.status == store.QUEUED:
            self.wake()
        return run

    def report(self, report: RunReport) -> store.ScoringRunRow:
        """Record a worker's result for one trace: publish it, or fail the run with the reason.

        A repeated report of a run its job settled already (the first answer was lost) changes nothing.
        """
        with transaction(self.sessions) as session:
            run = store.reporting_run(session, report.owner_id, report.run_id, report.job_id)
        if run.status != store.RUNNING:
            return run
        if report.trace_id != run.trace_id:
            raise InvalidArgument(
                "trace_id", f"scoring run {run.id} scores trace {run.trace_id}, not {report.trace_id}"
            )
        if not report.succeeded:
            return self._fail(report, report.error or "the scoring worker failed on this trace", report.permanent)
        if report.trace_revision != run.trace_revision:
            return self._fail(
                report,
                f"the worker scored revision {report.trace_revision} of trace {run.trace_id}, but the run is of "
                f"revision {run.trace_revision}; nothing was published",
            )
        return self._publish(report, run)

    def _publish(self, report: RunReport, run: store.ScoringRunRow) -> store.ScoringRunRow:
        """Publish a succeeded report if the trace is still at the run's revision and the result is sound."""
        try:
            trace = self.traces.trace_revision(run.owner_id, run.trace_id, run.trace_revision)
        except FailedPrecondition as error:
            return self._fail(
                report,
                f"trace {run.trace_id} changed while it was being scored ({error.message}); nothing was published; "
                "its new revision is scored next",
                permanent=True,
            )
        except NotFound:
            self._forget(run.owner_id, run.trace_id)
            raise NotFound(f"trace {run.trace_id} was deleted while it was being scored") from None
        try:
            actions = check_scores(trace, report.actions, report.trace_score)
        except InvalidArgument as error:
            self._fail(report, f"the scoring worker's result was refused: {error.message}; nothing was published")
            raise
        with transaction(self.sessions) as session:
            run = store.reporting_run(session, report.owner_id, report.run_id, report.job_id)
            store.replace_scores(session, run, actions, report.trace_score)
            store.finish_run(run, store.SUCCEEDED)
        log.info("trace scored", trace_id=run.trace_id, reward_model_id=run.reward_model_id, actions=len(actions))
        return run

    def publish_training_job(self, owner_id: str, model_id: str, job_key: str) -> tuple[int, int]:
        """Publish the scores the model's training job left under `job_key`; returns (published, rejected).

        The job must be the model's own; scores that cannot be read publish nothing and still make the
        model ready (its traces are then scored in the background). Publishing twice changes nothing.
        """
        training_scores.training_job_id(job_key)
        try:
            stored = training_scores.read_training_scores(self.objects, job_key)
        except (StashError, OSError) as error:
            log.warning("the training job's scores are unusable", reward_model_id=model_id, error=str(error))
            return self.publish_training(owner_id, model_id, [])
        if (stored.owner_id, stored.reward_model_id) != (owner_id, model_id):
            raise InvalidArgument("job_key", f"{job_key} is not the training job of reward model {model_id}")
        published = self.publish_training(owner_id, model_id, [_training_scores(trace) for trace in stored.traces])
        with transaction(self.sessions) as session:
            store.note_training_job(session, model_id, job_key)  # a shared evaluator release may name this job
        return published

    def publish_training(self, owner_id: str, model_id: str, traces: Sequence[TrainingScores]) -> tuple[int, int]:
        """Publish a succeeded model's training scores trace by trace; returns (published, rejected)."""
        # The backfill waits until the training scores are in, or it would queue the traces they cover.
        model = self._ready_model(owner_id, model_id, backfill=False)
        published = sum(self._publish_training_trace(model, item) for item in traces)
        with transaction(self.sessions) as session:
            store.request_backfill(session, model.id)
        self.wake()
        log.info("training scores published", reward_model_id=model_id, published=published, traces=len(traces))
        return published, len(traces) - published

    def _publish_training_trace(self, model: store.ScoringModelRow, item: TrainingScores) -> bool:
        try:
            trace = self.traces.trace_revision(model.owner_id, item.trace_id, item.trace_revision)
            actions = check_scores(trace, item.actions, item.trace_score, model.scores_actions)
        except NotFound:
            self._forget(model.owner_id, item.trace_id)
            return False
        except (FailedPrecondition, InvalidArgument) as error:
            reason = f"the training job's scores were refused: {error.message}; nothing was published"
            with transaction(self.sessions) as session:
                session.add(_settled_run(model, item, store.FAILED, reason))
            return False
        with transaction(self.sessions) as session:
            if store.covering_run(session, item.trace_id, model.id, item.trace_revision, model.artifact_key) is None:
                run = _settled_run(model, item, store.SUCCEEDED)
                session.add(run)
                store.replace_scores(session, run, actions, item.trace_score)
        return True

    def _owned_trace(self, owner_id: str, trace_id: str) -> ScorerTrace:
        try:
            return self.traces.current_trace(owner_id, trace_id)
        except NotFound:
            self._forget(owner_id, trace_id)  # deleted, or another owner's: either way the owner has nothing of it
            raise

    def _ready_model(self, owner_id: str, model_id: str, backfill: bool = True) -> store.ScoringModelRow:
        """The owner's succeeded model, remembered as ready (a model seen for the first time is backfilled unless
        `backfill` is False); FailedPrecondition while it cannot score."""
        model = self.models.reward_model(owner_id, model_id)
        if model.status != "succeeded" or model.artifact_key is None:
            raise FailedPrecondition(
                f"reward model {model.name} is {model.status}; only a succeeded model can score (wait for it to finish)"
            )
        artifact_key = model.artifact_key
        return self._retrying(lambda session: _remember(session, model, artifact_key, backfill))

    def _retrying(self, work: Callable[[Session], T]) -> T:
        """Run `work` in a transaction, again when a simultaneous request inserted the same row first."""
        for attempt in range(CONFLICT_ATTEMPTS):
            try:
                with transaction(self.sessions) as session:
                    return work(session)
            except IntegrityError:
                if attempt == CONFLICT_ATTEMPTS - 1:
                    raise Unavailable("simultaneous scoring requests kept conflicting; retry") from None
        raise AssertionError("unreachable")

    def _covering_or_new(
        self, session: Session, model: store.ScoringModelRow, trace: ScorerTrace
    ) -> store.ScoringRunRow:
        run = store.covering_run(session, trace.id, model.id, trace.revision, model.artifact_key)
        if run is None:
            run = store.new_run(model, trace.id, trace.revision, explicit=True)
            session.add(run)
            session.flush()
        elif run.status == store.QUEUED:
            run.explicit = True  # a person is waiting now: serve it before the background work
        return run

    def _fail(self, report: RunReport, error: str, permanent: bool = False) -> store.ScoringRunRow:
        with transaction(self.sessions) as session:
            run = store.reporting_run(session, report.owner_id, report.run_id, report.job_id)
            store.finish_run(run, store.FAILED, error, permanent)
        log.warning("scoring run failed", scoring_run_id=run.id, trace_id=run.trace_id, error=error)
        return run

    def _forget(self, owner_id: str, trace_id: str) -> None:
        with transaction(self.sessions) as session:
            store.forget_trace(session, owner_id, trace_id)


def _remember(session: Session, model: RewardModel, artifact_key: str, backfill: bool) -> store.ScoringModelRow:
    return store.remember_model(
        session, model.id, model.owner_id, model.name, artifact_key, model.scores_actions, backfill
    )


def _training_scores(trace: training_scores.TrainingScores) -> TrainingScores:
    actions = tuple(ActionResult(action.step_id, action.score, action.credit) for action in trace.actions)
    return TrainingScores(trace.trace_id, trace.trace_revision, trace.trace_score, actions)


def _settled_run(
    model: store.ScoringModelRow, item: TrainingScores, status: str, error: str | None = None
) -> store.ScoringRunRow:
    """A training publication as a finished run (failed ones are permanent: the backfill scores the trace anew)."""
    run = store.new_run(model, item.trace_id, item.trace_revision, explicit=False, status=status)
    run.started_at = run.finished_at = utc_now()
    run.error, run.permanent = error, status == store.FAILED
    return run
