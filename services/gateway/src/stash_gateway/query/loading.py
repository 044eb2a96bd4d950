"""Where the query tables come from: one server-streaming call per owning service, and their change markers.

Each service answers `StreamOwnerRows` with Arrow IPC chunks of the owner's rows, never one call per row,
and `GetOwnerVersion` with a marker that changes whenever any of those rows does.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from stash.rm.v1 import common_pb2
from stash_common.errors import StashError
from stash_gateway.peers import Peers

if TYPE_CHECKING:  # pyarrow loads with the first query, not with the gateway (`stash_gateway.query.limits`)
    import pyarrow as pa

# The tables each service owns, as the query sees them.
SOURCES: dict[str, tuple[str, ...]] = {
    "ingest": ("traces", "steps", "annotations"),
    "labeler": ("step_labels", "evaluations", "process_patterns"),
    "scorer": ("scores", "action_scores"),
}


@dataclass(frozen=True)
class LoadedTables:
    """One service's tables of one owner, and the owner's marker as the service read it before the rows."""

    source: str
    version: str
    tables: dict[str, pa.Table]

    @property
    def rows(self) -> int:
        """How many rows came, in all tables."""
        return sum(table.num_rows for table in self.tables.values())


def _stub(peers: Peers, source: str) -> Any:
    stubs = {"ingest": peers.ingest, "labeler": peers.labeler, "scorer": peers.scorer}
    return stubs[source]


def owner_version(peers: Peers, source: str, owner_id: str, timeout_s: float) -> str:
    """The owner's current change marker at one service."""
    request = common_pb2.GetOwnerVersionRequest(owner_id=owner_id)
    return str(_stub(peers, source).GetOwnerVersion(request, timeout=timeout_s).version)


def load_tables(peers: Peers, source: str, owner_id: str, timeout_s: float) -> LoadedTables:
    """Every table of one service for one owner, streamed in chunks."""
    from stash_common.owner_rows import read_chunks

    request = common_pb2.StreamOwnerRowsRequest(owner_id=owner_id)
    chunks: dict[str, list[bytes]] = defaultdict(list)
    versions = set()
    for message in _stub(peers, source).StreamOwnerRows(request, timeout=timeout_s):
        chunks[message.table].append(message.arrow_ipc)
        versions.add(message.version)
    if set(chunks) != set(SOURCES[source]) or len(versions) != 1:
        raise StashError(f"{source} sent tables {sorted(chunks)} with {len(versions)} markers, not {SOURCES[source]}")
    tables = {name: read_chunks(chunks[name]) for name in SOURCES[source]}
    return LoadedTables(source, versions.pop(), tables)
