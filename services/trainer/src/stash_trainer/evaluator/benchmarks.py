"""Frozen benchmarks and the corpus snapshots that training reads.

Rules:

- A benchmark is frozen from admitted, consented comparisons whose task groups all lie in the task groups
  the operator names. A version never changes: its items, content hash (SHA-256 of its canonical items),
  slices and size are stored once. Freezing a name again with different content is the next version;
  with the same content it answers the existing version.
- Benchmarks are disjoint: a name may not take a task group or trace that another benchmark holds.
  Freezing nothing is refused.
- A snapshot for training is every admitted, consented comparison that shares no trace and no task group
  with any benchmark version; it is stored as JSONL in object storage, with its hash and size.
- A revoked consent removes the account from every later benchmark and snapshot (selection happens
  here, through `review.admitted`); frozen versions stay as they were, and `withdrawn` names the comparisons
  of a version that a candidate started later must not be evaluated on.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from stash_common.db import new_id, utc_now
from stash_common.errors import FailedPrecondition, InvalidArgument
from stash_common.storage import ObjectStore
from stash_trainer.evaluator.consent import consented_scopes
from stash_trainer.evaluator.review import admitted, consented, record_action
from stash_trainer.evaluator.store import BenchmarkRow, ComparisonRow, SnapshotRow

MAX_NAME_CHARS = 100
SNAPSHOT_PREFIX = "evaluator/snapshots"


def freeze(session: Session, actor_id: str, name: str, task_groups: Sequence[str]) -> BenchmarkRow:
    """Freeze `name` from the admitted comparisons of `task_groups`: a new version, or the same one unchanged."""
    name = name.strip()
    if not name or len(name) > MAX_NAME_CHARS:
        raise InvalidArgument("name", f"must be 1..{MAX_NAME_CHARS} characters")
    if not task_groups:
        raise InvalidArgument("task_groups", "name at least one task group to hold out")
    groups = set(task_groups)
    chosen = [(row, way) for row, way in admitted(session) if set(row.task_groups) <= groups]
    if not chosen:
        raise FailedPrecondition("an empty benchmark cannot be frozen: no admitted comparison is in these task groups")
    items = [benchmark_item(row, way) for row, way in chosen]
    traces = sorted({trace for row, _ in chosen for trace in row.trace_ids})
    _check_disjoint(session, name, groups, set(traces))
    digest = content_hash(items)
    latest = _latest(session, name)
    if latest is not None and latest.content_hash == digest:
        return latest
    row = BenchmarkRow(
        id=new_id(),
        name=name,
        version=(latest.version + 1) if latest is not None else 1,
        content_hash=digest,
        task_groups=sorted(groups),
        trace_ids=traces,
        items=items,
        slices=slices([row for row, _ in chosen]),
        size=len(items),
        frozen_by=actor_id,
        frozen_at=utc_now(),
    )
    session.add(row)
    record_action(session, actor_id, "freeze_benchmark", {"name": name, "version": row.version, "hash": digest})
    return row


def take_snapshot(session: Session, objects: ObjectStore, actor_id: str) -> SnapshotRow:
    """Store the training corpus: admitted, consented comparisons that touch no benchmark's trace or task group."""
    held_groups, held_traces = held_out(session)
    all_admitted = admitted(session)
    kept = [
        (row, way)
        for row, way in all_admitted
        if not (set(row.task_groups) & held_groups or set(row.trace_ids) & held_traces)
    ]
    if not kept:
        raise FailedPrecondition("an empty snapshot cannot be taken: every admitted comparison is held out")
    lines = [training_line(row, way) for row, way in kept]
    body = "".join(json.dumps(line, sort_keys=True) + "\n" for line in lines).encode()
    snapshot_id = new_id()
    key = f"{SNAPSHOT_PREFIX}/{snapshot_id}.jsonl"
    row = SnapshotRow(
        id=snapshot_id,
        object_key=key,
        content_hash=hashlib.sha256(body).hexdigest(),
        size=len(lines),
        held_out=len(all_admitted) - len(kept),
        taken_by=actor_id,
        taken_at=utc_now(),
    )
    session.add(row)
    record_action(session, actor_id, "take_snapshot", {"snapshot_id": snapshot_id, "size": len(lines)})
    session.flush()
    objects.put(key, body)
    return row


def held_out(session: Session) -> tuple[set[str], set[str]]:
    """The task groups and traces of every benchmark version."""
    groups: set[str] = set()
    traces: set[str] = set()
    for row in session.scalars(select(BenchmarkRow)):
        groups.update(row.task_groups)
        traces.update(row.trace_ids)
    return groups, traces


def withdrawn(session: Session, version: BenchmarkRow) -> set[str]:
    """The comparisons of a frozen version whose owner's open consent no longer covers them (or that are gone)."""
    ids = {item["comparison_id"] for item in version.items}
    scopes = consented_scopes(session)
    rows = session.scalars(select(ComparisonRow).where(ComparisonRow.id.in_(sorted(ids))))
    return ids - {row.id for row in rows if consented(row, scopes)}


def benchmark_item(row: ComparisonRow, confirmed: bool) -> dict[str, Any]:
    """A benchmark's record of one comparison, better side first."""
    better, worse = (row.chosen, row.rejected) if confirmed else (row.rejected, row.chosen)
    return {
        "comparison_id": row.id,
        "better": _text(better),
        "worse": _text(worse),
        "action_type": row.action_type,
        "source_format": row.source_format,
        "owner_id": row.owner_id,
    }


def training_line(row: ComparisonRow, confirmed: bool) -> dict[str, Any]:
    """A snapshot line: the pair in the trainer's `pairs.jsonl` shape, with its provenance."""
    item = benchmark_item(row, confirmed)
    return {
        "chosen": item["better"],
        "rejected": item["worse"],
        "trace_ids": row.trace_ids,
        "granularity": "action",
        "action_type": row.action_type,
        "input_version": 2,
        "comparison_id": row.id,
        "preference_source": row.preference_source,
    }


def content_hash(items: Sequence[dict[str, Any]]) -> str:
    """SHA-256 of the items in canonical JSON, in comparison-id order."""
    ordered = sorted(items, key=lambda item: item["comparison_id"])
    return hashlib.sha256(json.dumps(ordered, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def slices(rows: Sequence[ComparisonRow]) -> dict[str, dict[str, int]]:
    """Sizes by action kind (assistant response vs tool call), source format and owner."""
    return {
        "action_type": dict(sorted(Counter(row.action_type for row in rows).items())),
        "source_format": dict(sorted(Counter(row.source_format for row in rows).items())),
        "owner": dict(sorted(Counter(row.owner_id for row in rows).items())),
    }


def benchmarks(session: Session) -> list[BenchmarkRow]:
    """Every benchmark version, by name then version."""
    return list(session.scalars(select(BenchmarkRow).order_by(BenchmarkRow.name, BenchmarkRow.version)))


def _latest(session: Session, name: str) -> BenchmarkRow | None:
    top = session.scalar(select(func.max(BenchmarkRow.version)).where(BenchmarkRow.name == name))
    if top is None:
        return None
    return session.scalars(select(BenchmarkRow).where(BenchmarkRow.name == name, BenchmarkRow.version == top)).one()


def _check_disjoint(session: Session, name: str, groups: set[str], traces: set[str]) -> None:
    for other in session.scalars(select(BenchmarkRow).where(BenchmarkRow.name != name)):
        shared_groups = groups & set(other.task_groups)
        if shared_groups:
            raise FailedPrecondition(
                f"benchmarks are disjoint: task group {min(shared_groups)} belongs to benchmark {other.name}"
            )
        shared_traces = traces & set(other.trace_ids)
        if shared_traces:
            trace = min(shared_traces)
            raise FailedPrecondition(f"benchmarks are disjoint: trace {trace} belongs to benchmark {other.name}")


def _text(side: dict[str, Any]) -> str:
    return f"{side['context']}\n\n{side['action']}" if side["context"] else side["action"]
