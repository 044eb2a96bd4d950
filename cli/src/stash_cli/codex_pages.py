"""Codex history pages: rollouts that continue an earlier rollout instead of repeating it.

A page's `session_meta.payload.history_base` is `{thread_id, end_ordinal_exclusive, end_byte_offset}`:
`thread_id` is the rollout id of the base file (the UUID at the end of its `rollout-…-<id>.jsonl` name),
and the page inherits the base's first `end_ordinal_exclusive` records, which end exactly at byte
`end_byte_offset` of the base file. A base may be a page itself. The gateway refuses an unresolved page,
so the CLI rebuilds the whole conversation before an upload: the page's own `session_meta` (without
`history_base`), the inherited records (without their `session_meta`), then the page's other records.

Records are split on LF only, so a U+2028 or U+2029 inside a message string stays inside its record.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

import orjson

_ROLLOUT_ID = re.compile(r"-([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})\.jsonl$")


class PageError(Exception):
    """A history page that cannot be rebuilt: its base is missing, ambiguous or does not match."""


@dataclass(frozen=True)
class HistoryBase:
    """Where a page's inherited history lives: the base rollout and the end of the part it inherits."""

    rollout_id: str
    end_ordinal: int
    end_byte: int


@dataclass(frozen=True)
class Rollout:
    """One Codex rollout file: its rollout id (from the name), the session it belongs to, and its base."""

    path: Path
    rollout_id: str | None
    session_id: str | None
    base: HistoryBase | None


def lf_records(raw: bytes) -> list[bytes]:
    """The records of a JSONL file with their LF endings; an unterminated last record is kept as it is."""
    parts = raw.split(b"\n")
    records = [part + b"\n" for part in parts[:-1]]
    return records + [parts[-1]] if parts[-1] else records


def rollout_id_of(path: Path) -> str | None:
    """The rollout id at the end of a `rollout-<time>-<uuid>.jsonl` name."""
    found = _ROLLOUT_ID.search(path.name)
    return found.group(1).lower() if found else None


def read_rollout(path: Path) -> Rollout:
    """The facts of a rollout from its first record (its `session_meta`)."""
    with path.open("rb") as file:
        first = file.readline()
    meta = _session_meta(first)
    payload = meta.get("payload", {}) if meta else {}
    session_id = payload.get("id") if isinstance(payload.get("id"), str) else None
    return Rollout(path, rollout_id_of(path), session_id, _history_base(payload, path))


def starts_a_rollout(path: Path) -> bool:
    """True when the file's first record is a Codex `session_meta`."""
    with path.open("rb") as file:
        return _session_meta(file.readline()) is not None


def index_rollouts(paths: Iterable[Path]) -> dict[str, list[Path]]:
    """Rollout id → the files that carry it (copies of one rollout in several places included)."""
    index: dict[str, list[Path]] = {}
    for path in paths:
        rollout_id = rollout_id_of(path)
        if rollout_id is not None:
            index.setdefault(rollout_id, []).append(path)
    return index


def resolve_page(path: Path, index: Mapping[str, Sequence[Path]]) -> bytes:
    """The whole conversation of a rollout: the file itself when it is not a page, else the rebuilt one."""
    return b"".join(_resolved_records(path, path.read_bytes(), index, chain=()))


def newest_per_session(rollouts: Iterable[Rollout]) -> list[Rollout]:
    """The newest page of each session (latest modification, then name); rollouts without a session id stay."""
    newest: dict[str, Rollout] = {}
    alone: list[Rollout] = []
    for rollout in rollouts:
        if rollout.session_id is None:
            alone.append(rollout)
        elif rollout.session_id not in newest or _age(rollout) > _age(newest[rollout.session_id]):
            newest[rollout.session_id] = rollout
    return [*alone, *newest.values()]


def _age(rollout: Rollout) -> tuple[float, str]:
    return rollout.path.stat().st_mtime, rollout.path.name


def _resolved_records(
    path: Path, raw: bytes, index: Mapping[str, Sequence[Path]], chain: tuple[Path, ...]
) -> list[bytes]:
    records = lf_records(raw)
    meta = _session_meta(records[0]) if records else None
    payload = meta.get("payload", {}) if meta else {}
    base = _history_base(payload, path)
    if meta is None or base is None:
        return records
    base_path = _base_file(path, base, index)
    if base_path in chain or base_path == path:
        raise PageError(f"{path}: history_base {base.rollout_id} leads back to itself")
    inherited = _resolved_records(base_path, _exact_prefix(path, base, base_path), index, (*chain, path))
    own_meta = {**meta, "payload": {key: value for key, value in payload.items() if key != "history_base"}}
    return [orjson.dumps(own_meta) + b"\n", *(r for r in inherited if not _is_session_meta(r)), *records[1:]]


def _base_file(path: Path, base: HistoryBase, index: Mapping[str, Sequence[Path]]) -> Path:
    """The one file of the base rollout; copies with equal bytes count as one."""
    candidates = index.get(base.rollout_id, [])
    if not candidates:
        raise PageError(f"{path}: its history_base rollout {base.rollout_id} is not on this machine")
    distinct = {candidate.read_bytes(): candidate for candidate in candidates}
    if len(distinct) > 1:
        names = ", ".join(str(candidate) for candidate in candidates)
        raise PageError(f"{path}: its history_base rollout {base.rollout_id} is ambiguous: {names} differ")
    return next(iter(distinct.values()))


def _exact_prefix(path: Path, base: HistoryBase, base_path: Path) -> bytes:
    """The base's first `end_ordinal` records, which must end exactly at `end_byte`."""
    records = lf_records(base_path.read_bytes())
    if not 1 <= base.end_ordinal <= len(records):
        raise PageError(
            f"{path}: history_base ends at record {base.end_ordinal}, but {base_path} has {len(records)} records"
        )
    prefix = b"".join(records[: base.end_ordinal])
    if len(prefix) != base.end_byte or not prefix.endswith(b"\n"):
        raise PageError(
            f"{path}: history_base ends at record {base.end_ordinal} and byte {base.end_byte}, but record "
            f"{base.end_ordinal} of {base_path} ends at byte {len(prefix)}"
        )
    return prefix


def _session_meta(record: bytes) -> dict[str, Any] | None:
    try:
        value = orjson.loads(record)
    except orjson.JSONDecodeError:
        return None
    if isinstance(value, dict) and value.get("type") == "session_meta" and isinstance(value.get("payload"), dict):
        return value
    return None


def _is_session_meta(record: bytes) -> bool:
    return _session_meta(record) is not None


def _history_base(payload: Mapping[str, Any], path: Path) -> HistoryBase | None:
    base = payload.get("history_base")
    if base is None:
        return None
    if not isinstance(base, dict):
        raise _malformed_base(path, base)
    rollout_id, end_ordinal, end_byte = (
        base.get("thread_id"),
        base.get("end_ordinal_exclusive"),
        base.get("end_byte_offset"),
    )
    if not isinstance(rollout_id, str) or not _is_count(end_ordinal) or not _is_count(end_byte):
        raise _malformed_base(path, base)
    return HistoryBase(rollout_id.lower(), end_ordinal, end_byte)


def _malformed_base(path: Path, base: Any) -> PageError:
    return PageError(
        f"{path}: history_base must be {{thread_id, end_ordinal_exclusive, end_byte_offset}}, got {base!r}"
    )


def _is_count(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
