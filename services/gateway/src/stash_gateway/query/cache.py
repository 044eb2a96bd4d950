"""The warm databases, one per owner, least recently used first out.

An entry remembers, per owning service, the change marker its tables were loaded at; the engine reloads a
service's tables when the service's current marker differs. The cache is bounded twice: by how many
owners it keeps and by the memory their databases hold together. A database evicted while a query still
uses it lives until that query ends.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from stash_gateway.query.limits import QueryLimits

if TYPE_CHECKING:  # DuckDB loads with the first query, not with the gateway (`stash_gateway.query.limits`)
    from stash_gateway.query.database import OwnerDatabase


@dataclass
class CacheEntry:
    """One owner's database, the marker each service's tables in it were loaded at, and its size."""

    database: OwnerDatabase
    versions: dict[str, str] = field(default_factory=dict)
    memory_bytes: int = 0


class OwnerCache:
    """At most `max_owners` databases holding at most `max_bytes` together (the newest one always stays)."""

    def __init__(self, limits: QueryLimits, max_owners: int, max_bytes: int) -> None:
        self.limits = limits
        self.max_owners = max_owners
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, CacheEntry] = OrderedDict()
        self._lock = threading.Lock()

    def entry(self, owner_id: str) -> CacheEntry:
        """The owner's entry, most recently used now; an empty database when none is kept."""
        with self._lock:
            entry = self._entries.get(owner_id)
            if entry is None:
                from stash_gateway.query.database import OwnerDatabase

                entry = self._entries[owner_id] = CacheEntry(OwnerDatabase(self.limits))
            self._entries.move_to_end(owner_id)
            return entry

    def resized(self, owner_id: str, memory_bytes: int) -> None:
        """Record what the owner's database holds after a load, and evict the least recently used beyond bounds."""
        with self._lock:
            entry = self._entries.get(owner_id)
            if entry is not None:
                entry.memory_bytes = memory_bytes
            while len(self._entries) > 1 and (
                len(self._entries) > self.max_owners or self._total_bytes() > self.max_bytes
            ):
                self._entries.popitem(last=False)

    def total_bytes(self) -> int:
        """The memory every kept database holds."""
        with self._lock:
            return self._total_bytes()

    def _total_bytes(self) -> int:
        return sum(entry.memory_bytes for entry in self._entries.values())

    def owners(self) -> list[str]:
        """The owners kept, least recently used first."""
        with self._lock:
            return list(self._entries)
