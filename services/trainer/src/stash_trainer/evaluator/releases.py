"""The shared evaluator's training policy, candidates, gated releases and rollbacks.

Rules:

- The operator sets the training policy (`TrainingPolicy`); every change is recorded with who and when.
- A candidate is a reward model owned by the service account `shared-evaluator`, trained by the same
  dispatcher and launcher as personal models from a corpus snapshot taken when it starts; its inputs
  (snapshot, policy, benchmark versions with their hashes) are recorded with it. Starting one needs a frozen
  benchmark, since a candidate that cannot be evaluated cannot be released.
- Consent is checked again when a candidate starts: a frozen version never changes, so the comparisons of an
  account that has revoked its consent since are recorded as the version's `withdrawn` and are neither sent to
  the candidate's worker nor counted in its report; a version with nothing left is not evaluated on.
- The schedule starts a candidate when `schedule_minutes` have passed since the last one and at least
  `min_new_comparisons` admitted comparisons outside the benchmarks are new since the last one's snapshot.
  Every trainer replica runs the schedule: the check and the start happen under a lock on the policy row, so
  only one replica starts the candidate that is due.
- Once trained, its worker has scored every benchmark item; the report and the gate's decision
  (`stash_trainer.evaluator.gate`) are stored, once: a candidate already gated is never gated again, so a
  trainer that resumes a candidate another one was gating changes nothing (`ungated`). A pass is released at
  once (`auto_release`) or waits for the operator's approval; a refusal is kept with its reasons.
- Releases are numbered from 1. Each release and each rollback (to any release but the current one) is a
  publication for the scorer; the publication loop retries each until the scorer acknowledges it, in order.
  The latest publication's release is the current one.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from stash_common.db import new_id, utc_now
from stash_common.errors import FailedPrecondition, InvalidArgument, NotFound
from stash_common.jobs.files import describe
from stash_common.storage import ObjectStore
from stash_trainer import store
from stash_trainer.evaluator import benchmarks as frozen
from stash_trainer.evaluator.gate import Decision, benchmark_report, decide, primary_accuracy
from stash_trainer.evaluator.review import admitted, record_action
from stash_trainer.evaluator.store import (
    BenchmarkRow,
    CandidateRow,
    PublicationRow,
    ReleaseRow,
    SnapshotRow,
    TrainingPolicyRow,
)

EVALUATOR_OWNER = "shared-evaluator"  # the service account that owns every candidate's reward model row
CANDIDATE_CONFIG = "evaluator_candidate"  # the training_config key that marks a candidate's model
SCHEDULE_ACTOR = "schedule"
GATE_ACTOR = "gate"
TRAINING, EVALUATING, FAILED = "training", "evaluating", "failed"
REFUSED, AWAITING, RELEASED = "refused", "awaiting_approval", "released"


class TrainingPolicy(BaseModel):
    """What a candidate trains with, when the schedule starts one, and the release gate."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_model: str | None = Field(default=None, min_length=1, max_length=500)  # None: the trainer's default
    epochs: int = Field(default=1, ge=1, le=50)
    max_pairs: int = Field(default=2000, ge=2, le=100_000)
    schedule_minutes: int = Field(default=0, ge=0, le=60 * 24 * 31)  # 0: candidates start by hand only
    min_new_comparisons: int = Field(default=50, ge=1, le=1_000_000)
    primary_benchmark: str | None = Field(default=None, min_length=1, max_length=100)  # None: the first name
    margin: float = Field(default=0.0, ge=-1.0, le=1.0)
    slice_tolerance: float = Field(default=0.05, ge=0.0, le=1.0)
    auto_release: bool = False


def policy_of(session: Session) -> tuple[TrainingPolicy, TrainingPolicyRow | None]:
    """The policy in force and its row (None while the defaults apply)."""
    row = session.get(TrainingPolicyRow, 1)
    return (TrainingPolicy.model_validate(row.policy) if row is not None else TrainingPolicy()), row


def set_policy(session: Session, actor_id: str, values: Mapping[str, Any]) -> TrainingPolicyRow:
    """Replace the policy (unset keys take their defaults), recorded with who and when."""
    try:
        policy = TrainingPolicy.model_validate(dict(values))
    except ValidationError as error:
        raise InvalidArgument("policy", describe(error)) from error
    row = session.get(TrainingPolicyRow, 1)
    if row is None:
        row = TrainingPolicyRow(id=1)
        session.add(row)
    row.policy, row.set_by, row.set_at = policy.model_dump(), actor_id, utc_now()
    record_action(session, actor_id, "set_training_policy", row.policy)
    return row


def start_candidate(
    session: Session, objects: ObjectStore, actor_id: str, default_base_model: str, compute: str
) -> CandidateRow:
    """Queue a candidate trained from a new corpus snapshot under the current policy."""
    policy, _ = policy_of(session)
    versions = frozen.benchmarks(session)
    if not versions:
        raise FailedPrecondition("freeze a benchmark first: a candidate that cannot be evaluated cannot be released")
    inputs = _benchmark_inputs(session, versions)
    if not inputs:
        raise FailedPrecondition(
            "freeze a benchmark first: every comparison of the frozen benchmarks was withdrawn by a revoked consent"
        )
    snapshot = frozen.take_snapshot(session, objects, actor_id)
    if snapshot.size < 2:
        raise FailedPrecondition(f"the corpus snapshot holds {snapshot.size} comparison; training needs at least 2")
    now = utc_now()
    model = store.RewardModelRow(
        owner_id=EVALUATOR_OWNER,
        name=f"shared evaluator candidate {now:%Y-%m-%d %H:%M}",
        base_model=policy.base_model or default_base_model,
        compute=compute,
        epochs=policy.epochs,
        max_pairs=policy.max_pairs,
        training_config={CANDIDATE_CONFIG: True},
        trace_ids=[],
        progress={},
        created_at=now,
    )
    session.add(model)
    session.flush()
    row = CandidateRow(
        id=model.id,
        snapshot_id=snapshot.id,
        policy=policy.model_dump(),
        benchmarks=inputs,
        created_by=actor_id,
        created_at=now,
    )
    session.add(row)
    record_action(session, actor_id, "train_candidate", {"candidate_id": row.id, "snapshot_id": snapshot.id})
    return row


def start_scheduled(
    session: Session, objects: ObjectStore, default_base_model: str, compute: str
) -> CandidateRow | None:
    """Start the candidate the schedule says is due, if any. The policy row is locked first (PostgreSQL), so a
    second replica running the schedule waits, then sees the new candidate and finds nothing due."""
    if session.get(TrainingPolicyRow, 1, with_for_update=True) is None or not due(session, utc_now()):
        return None  # no policy row: the defaults apply, and they schedule nothing
    return start_candidate(session, objects, SCHEDULE_ACTOR, default_base_model, compute)


def is_candidate(model: store.RewardModelRow) -> bool:
    """Whether a reward model row is a shared evaluator candidate's."""
    return model.owner_id == EVALUATOR_OWNER and bool((model.training_config or {}).get(CANDIDATE_CONFIG))


def training_inputs(
    session: Session, objects: ObjectStore, candidate_id: str, seed: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The candidate's pairs (its snapshot's lines, a seeded sample of at most `max_pairs`) and the benchmark items
    its worker scores after training (`trace_id` the benchmark version, `step_id` "<comparison id>:better|worse")."""
    row = _candidate(session, candidate_id)
    snapshot = session.get(SnapshotRow, row.snapshot_id)
    if snapshot is None:
        raise FailedPrecondition(f"corpus snapshot {row.snapshot_id} is gone")
    lines = [json.loads(line) for line in objects.get(snapshot.object_key).decode().splitlines() if line]
    limit = int(row.policy["max_pairs"])
    if len(lines) > limit:
        lines = random.Random(f"{seed}:{candidate_id}").sample(lines, limit)
    items = [
        {"trace_id": version.id, "step_id": f"{item['comparison_id']}:{side}", "text": item[side]}
        for version, evaluated in _evaluated(session, row)
        for item in evaluated
        for side in ("better", "worse")
    ]
    return lines, items


def settle(session: Session, candidate_id: str, scores: Mapping[tuple[str, str], float]) -> CandidateRow:
    """Store the candidate's benchmark report and the gate's decision; release it when the policy says so.

    `scores` maps (benchmark version id, worker step id) to the candidate's raw score. A candidate gated already
    is returned as it is."""
    row = _candidate(session, candidate_id, lock=True)
    if row.decision is not None:
        return row
    report = [
        benchmark_report(
            {"id": version.id, "name": version.name, "version": version.version, "items": evaluated},
            _item_scores(scores, version.id),
        )
        for version, evaluated in _evaluated(session, row)
    ]
    policy = TrainingPolicy.model_validate(row.policy)
    decision = decide(report, _current_report(session), policy.primary_benchmark, policy.margin, policy.slice_tolerance)
    row.report, row.gate = report, decision.to_json()
    if not decision.passed:
        row.decision, row.reason = REFUSED, "; ".join(decision.reasons)
    elif policy.auto_release:
        release(session, row, GATE_ACTOR)
    else:
        row.decision = AWAITING
    return row


def fail(session: Session, candidate_id: str, reason: str) -> None:
    """Refuse a trained candidate that could not be evaluated, with the reason (unless it was gated already)."""
    row = _candidate(session, candidate_id, lock=True)
    if row.decision is not None:
        return
    row.decision, row.reason = REFUSED, reason
    row.gate = Decision(False, current_number(session), (reason,)).to_json()


def approve(session: Session, actor_id: str, candidate_id: str) -> ReleaseRow:
    """Release a candidate that passed the gate and waits for approval."""
    row = _candidate(session, candidate_id)
    if row.decision != AWAITING:
        state = row.decision or "still training"
        raise FailedPrecondition(f"candidate {candidate_id} is {state}: only a candidate awaiting approval is released")
    return release(session, row, actor_id)


def release(session: Session, candidate: CandidateRow, actor_id: str) -> ReleaseRow:
    """Number and publish the candidate as the current release."""
    model = session.get(store.RewardModelRow, candidate.id)
    if model is None or model.job_id is None:
        raise FailedPrecondition(f"candidate {candidate.id} has no training job")
    number = (session.scalar(select(func.max(ReleaseRow.number))) or 0) + 1
    now = utc_now()
    row = ReleaseRow(
        number=number,
        candidate_id=candidate.id,
        job_key=f"jobs/trainer/{model.job_id}",
        notes=_notes(candidate),
        released_by=actor_id,
        released_at=now,
    )
    session.add(row)
    candidate.decision = RELEASED
    _publish(session, number, "release", actor_id, now)
    record_action(session, actor_id, "release", {"number": number, "candidate_id": candidate.id})
    return row


def rollback(session: Session, actor_id: str, number: int) -> ReleaseRow:
    """Make an earlier release current again."""
    row = session.get(ReleaseRow, number)
    if row is None:
        raise NotFound(f"release {number} not found")
    if current_number(session) == number:
        raise FailedPrecondition(f"release {number} is already the current release")
    _publish(session, number, "rollback", actor_id, utc_now())
    record_action(session, actor_id, "rollback", {"number": number})
    return row


def current_number(session: Session) -> int | None:
    """The number of the current release (the latest publication's), None before the first."""
    latest = select(PublicationRow.number).order_by(PublicationRow.published_at.desc()).limit(1)
    return session.scalar(latest)


def releases(session: Session) -> list[ReleaseRow]:
    """Every release, newest number first."""
    return list(session.scalars(select(ReleaseRow).order_by(ReleaseRow.number.desc())))


def acknowledged(session: Session, number: int) -> bool:
    """Whether the scorer acknowledged every publication of this release."""
    query = select(func.count()).where(PublicationRow.number == number, PublicationRow.acknowledged_at.is_(None))
    return not session.scalar(query)


def pending(session: Session) -> list[PublicationRow]:
    """The publications the scorer has not acknowledged, oldest first."""
    query = select(PublicationRow).where(PublicationRow.acknowledged_at.is_(None))
    return list(session.scalars(query.order_by(PublicationRow.published_at)))


def candidates(session: Session) -> list[tuple[CandidateRow, store.RewardModelRow | None]]:
    """Every candidate with its reward model row, newest first."""
    rows = list(session.scalars(select(CandidateRow).order_by(CandidateRow.created_at.desc())))
    return [(row, session.get(store.RewardModelRow, row.id)) for row in rows]


def status_of(candidate: CandidateRow, model: store.RewardModelRow | None) -> str:
    """training, evaluating (trained, not gated yet), failed, refused, awaiting_approval or released."""
    if candidate.decision is not None:
        return candidate.decision
    if model is None or model.status == store.FAILED:
        return FAILED
    return EVALUATING if model.status == store.SUCCEEDED else TRAINING


def ungated(session: Session, finished_before: datetime) -> list[tuple[str, str]]:
    """The candidates trained before `finished_before` and still not gated, as (candidate id, training job id):
    the trainer that watched their worker stopped between the worker's success and the gate."""
    model = store.RewardModelRow
    query = (
        select(CandidateRow.id, model.job_id)
        .join(model, model.id == CandidateRow.id)
        .where(CandidateRow.decision.is_(None), model.status == store.SUCCEEDED, model.finished_at < finished_before)
    )
    return [(candidate_id, job_id) for candidate_id, job_id in session.execute(query) if job_id]


def due(session: Session, now: datetime) -> bool:
    """Whether the schedule starts a candidate now."""
    policy, _ = policy_of(session)
    if policy.schedule_minutes == 0:
        return False
    last = session.scalars(select(CandidateRow).order_by(CandidateRow.created_at.desc()).limit(1)).first()
    if last is not None and now - last.created_at < timedelta(minutes=policy.schedule_minutes):
        return False
    return new_comparisons(session, last) >= policy.min_new_comparisons


def new_comparisons(session: Session, last: CandidateRow | None) -> int:
    """How many more admitted comparisons outside the benchmarks there are than in the last candidate's snapshot."""
    groups, traces = frozen.held_out(session)
    eligible = sum(
        1 for row, _ in admitted(session) if not (set(row.task_groups) & groups or set(row.trace_ids) & traces)
    )
    snapshot = session.get(SnapshotRow, last.snapshot_id) if last is not None else None
    return eligible - (snapshot.size if snapshot is not None else 0)


def _item_scores(scores: Mapping[tuple[str, str], float], version_id: str) -> dict[tuple[str, str], float]:
    """One benchmark version's scores by (comparison id, "better" | "worse"), from the worker's step ids."""
    found = {}
    for (scored_version, step_id), score in scores.items():
        comparison_id, _, side = step_id.rpartition(":")
        if scored_version == version_id:
            found[(comparison_id, side)] = score
    return found


def _publish(session: Session, number: int, kind: str, actor_id: str, at: datetime) -> None:
    session.add(PublicationRow(id=new_id(), number=number, kind=kind, actor_id=actor_id, published_at=at))


def _current_report(session: Session) -> tuple[int, list[Any]] | None:
    number = current_number(session)
    if number is None:
        return None
    row = session.get(ReleaseRow, number)
    candidate = session.get(CandidateRow, row.candidate_id) if row is not None else None
    return (number, list(candidate.report or [])) if candidate is not None else None


def _candidate(session: Session, candidate_id: str, lock: bool = False) -> CandidateRow:
    row = session.get(CandidateRow, candidate_id, with_for_update=lock)
    if row is None:
        raise NotFound(f"candidate {candidate_id} not found")
    return row


def _evaluated(session: Session, row: CandidateRow) -> list[tuple[BenchmarkRow, list[dict[str, Any]]]]:
    """Each benchmark version the candidate is evaluated on, with its items less those withdrawn when it started
    (candidates started before withdrawals were recorded have none)."""
    evaluated = []
    for entry in row.benchmarks:
        version = session.get(BenchmarkRow, entry["id"])
        if version is not None:
            left_out = set(entry.get("withdrawn", ()))
            evaluated.append((version, [item for item in version.items if item["comparison_id"] not in left_out]))
    return evaluated


def _benchmark_inputs(session: Session, versions: Sequence[BenchmarkRow]) -> list[dict[str, Any]]:
    """The versions a new candidate is evaluated on, each with the comparisons withdrawn since it was frozen; a
    version whose comparisons were all withdrawn is left out."""
    inputs = []
    for version in versions:
        withdrawn = frozen.withdrawn(session, version)
        if len(withdrawn) < version.size:
            inputs.append(_benchmark_input(version, withdrawn))
    return inputs


def _benchmark_input(version: BenchmarkRow, withdrawn: set[str]) -> dict[str, Any]:
    return {
        "id": version.id,
        "name": version.name,
        "version": version.version,
        "content_hash": version.content_hash,
        "withdrawn": sorted(withdrawn),
    }


def _notes(candidate: CandidateRow) -> str:
    policy = TrainingPolicy.model_validate(candidate.policy)
    head = primary_accuracy(candidate.report or [], policy.primary_benchmark)
    budget = f"{policy.epochs} epoch(s), up to {policy.max_pairs} pairs"
    trained = f"trained on corpus snapshot {candidate.snapshot_id} ({budget})"
    if head is None or head["accuracy"] is None:
        return trained
    interval = f"95 % interval {head['low']:.3f}..{head['high']:.3f}, n={head['n']}"
    return f"{trained}; accuracy {head['accuracy']:.3f} on {head['name']} v{head['version']} ({interval})"
