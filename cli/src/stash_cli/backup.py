"""`stash-rm export` / `stash-rm import` of a whole account as one JSONL file, through the REST API.

The file's first line is a header; then one line per trace (oldest import first, the Stash Trace
Format document with its source id and the trace's id in the exporting account), per annotation
(the `/export/annotations` record) and per named trace source:

    {"kind": "stash-rm-account", "version": 1, "user_name": …, "exported_at": …, "traces": N, …}
    {"kind": "trace", "trace_id": …, "source_id": …, "trace": {"id": …, "steps": […], …}}
    {"kind": "annotation", "trace_id": …, "step_index": …, "rating": …, "comment": …, "quote": …, …}
    {"kind": "source", "source_id": …, "name": …}

Importing replays it into an empty account: each trace in its own request and in the file's order (so
a second export lists them in the same order), then the annotations on the new trace and step ids,
then the source names. Ids the platform hands out and timestamps are new; everything else is equal.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import orjson

from stash_cli.client import GatewayClient
from stash_common.requests import PAGE_LIMIT_MAX

KIND = "stash-rm-account"
VERSION = 1


class BackupError(Exception):
    """An export file that cannot be imported, or an account it cannot be imported into."""


@dataclass
class Counts:
    """How many of each kind of record an export or import handled."""

    traces: int = 0
    annotations: int = 0
    sources: int = 0

    def line(self) -> str:
        """`3 traces, 5 annotations, 1 source name`."""
        return f"{self.traces} traces, {self.annotations} annotations, {self.sources} source names"


def is_account_export(path: Path) -> bool:
    """True when the file starts with an account export's header line."""
    with path.open("rb") as file:
        first = file.readline()
    try:
        header = orjson.loads(first)
    except orjson.JSONDecodeError:
        return False
    return isinstance(header, dict) and header.get("kind") == KIND


def export_account(client: GatewayClient, output: IO[bytes], progress: Callable[[], None] = lambda: None) -> Counts:
    """Write the caller's whole account to `output`; `progress` is called once per trace written."""
    summaries = _oldest_first(client)
    annotations = [orjson.loads(line) for line in client.text("/export/annotations").splitlines() if line.strip()]
    sources = [s for s in client.call("GET", "/trace-sources") if s["name"] != s["source_id"]]
    header = {
        "kind": KIND,
        "version": VERSION,
        "user_name": client.call("GET", "/me")["user_name"],
        "exported_at": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        "traces": len(summaries),
        "annotations": len(annotations),
        "sources": len(sources),
    }
    _write(output, header)
    for summary in summaries:
        document = client.text(f"/export/traces?trace_id={summary['id']}").strip()
        if not document:
            raise BackupError(f"trace {summary['id']} was deleted during the export; export again")
        record = {"kind": "trace", "trace_id": summary["id"], "source_id": summary["source_id"]}
        _write(output, {**record, "trace": orjson.loads(document)})
        progress()
    for annotation in annotations:
        _write(output, {"kind": "annotation", **annotation})
    for source in sources:
        _write(output, {"kind": "source", "source_id": source["source_id"], "name": source["name"]})
    return Counts(len(summaries), len(annotations), len(sources))


def _oldest_first(client: GatewayClient) -> list[dict[str, Any]]:
    """Every trace summary of the caller, oldest import first (the list route pages newest first)."""
    summaries: list[dict[str, Any]] = []
    while True:
        page = client.call("GET", "/traces", params={"limit": PAGE_LIMIT_MAX, "offset": len(summaries)})
        summaries.extend(page["traces"])
        if not page["traces"] or len(summaries) >= page["total"]:
            break
    if len({summary["id"] for summary in summaries}) != len(summaries):
        raise BackupError("traces were imported during the export; export again")
    return summaries[::-1]


def _write(output: IO[bytes], record: dict[str, Any]) -> None:
    output.write(orjson.dumps(record) + b"\n")


@dataclass
class _Restore:
    """What an import has done so far: the new id of each exported trace, and each new trace's step ids."""

    client: GatewayClient
    trace_ids: dict[str, str] = field(default_factory=dict)
    step_ids: dict[str, list[str]] = field(default_factory=dict)
    counts: Counts = field(default_factory=Counts)

    def trace(self, record: dict[str, Any]) -> None:
        body = {"format": "stash", "data": orjson.dumps(record["trace"]).decode(), "source_id": record["source_id"]}
        imported = self.client.call("POST", "/traces/import", json=body)
        self.trace_ids[record["trace_id"]] = imported["trace_ids"][0]
        self.counts.traces += 1

    def annotation(self, record: dict[str, Any]) -> None:
        trace_id = self._new_trace_id(record)
        body: dict[str, Any] = {"rating": record["rating"], "comment": record["comment"], "quote": record["quote"]}
        if record["step_index"] is not None:
            body["step_id"] = self._step_ids(trace_id)[record["step_index"]]
        created = self.client.call("POST", f"/traces/{trace_id}/annotations", json=body)
        if record["label_error"] or record["label_error_note"] is not None:
            flag = {"label_error": record["label_error"], "label_error_note": record["label_error_note"]}
            self.client.call("PATCH", f"/annotations/{created['id']}", json=flag)
        self.counts.annotations += 1

    def source(self, record: dict[str, Any]) -> None:
        self.client.call("PUT", "/trace-sources", json={"source_id": record["source_id"], "name": record["name"]})
        self.counts.sources += 1

    def _new_trace_id(self, record: dict[str, Any]) -> str:
        if record["trace_id"] not in self.trace_ids:
            raise BackupError(f"annotation of trace {record['trace_id']}, which is not in the file before it")
        return self.trace_ids[record["trace_id"]]

    def _step_ids(self, trace_id: str) -> list[str]:
        if trace_id not in self.step_ids:
            self.step_ids[trace_id] = [step["id"] for step in self.client.call("GET", f"/traces/{trace_id}")["steps"]]
        return self.step_ids[trace_id]


def import_account(client: GatewayClient, path: Path, progress: Callable[[], None] = lambda: None) -> Counts:
    """Replay an export file into the caller's account, which must hold no traces yet; a file that is not
    whole is refused before anything is imported."""
    _check_whole(path)
    existing = client.call("GET", "/traces", params={"limit": 1})["total"]
    if existing:
        raise BackupError(f"this account already has {existing} traces; import an account export into a fresh one")
    restore = _Restore(client)
    handlers = {"trace": restore.trace, "annotation": restore.annotation, "source": restore.source}
    records = _records(path)
    next(records)  # the header
    for record in records:
        handlers[record["kind"]](record)
        progress()
    return restore.counts


def _check_whole(path: Path) -> None:
    """The file's version is known, every record's kind too, and it holds as many records as its header says."""
    records = _records(path)
    header = next(records, {})
    if header.get("version") != VERSION:
        raise BackupError(f"{path}: export version {header.get('version')!r}; this stash-rm reads version {VERSION}")
    kinds: Counter[str] = Counter()
    for number, record in enumerate(records, start=2):
        kind = record.get("kind")
        if kind not in ("trace", "annotation", "source"):
            raise BackupError(f"{path}:{number}: unknown record kind {kind!r}")
        kinds[kind] += 1
    found = Counts(kinds["trace"], kinds["annotation"], kinds["source"])
    promised = Counts(header.get("traces", -1), header.get("annotations", -1), header.get("sources", -1))
    if found != promised:
        raise BackupError(f"{path} is incomplete: its header promises {promised.line()}, it holds {found.line()}")


def _records(path: Path) -> Iterator[dict[str, Any]]:
    """The file's records, one per line, each checked to be a JSON object."""
    with path.open("rb") as file:
        for number, line in enumerate(file, start=1):
            if not line.strip():
                continue
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError as error:
                raise BackupError(f"{path}:{number}: not JSON ({error})") from None
            if not isinstance(record, dict) or (number == 1 and record.get("kind") != KIND):
                raise BackupError(f"{path}:{number}: not a stash-rm account export (see `stash-rm export`)")
            yield record
