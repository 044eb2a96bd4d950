"""An owner's rows as the gateway's SQL queries load them: Arrow IPC chunks, and the owner's change marker.

Ingest, the labeler and the scorer each stream the tables they own for one owner (`StreamOwnerRows`)
and keep, per owner, a change marker (`GetOwnerVersion`) that the gateway compares with the marker of
its cached copy. The marker is a random token in a table of the service's own, replaced in the same
transaction as every insert, update or delete of the owner's rows, as that transaction's last
statement; a stream reads it before the rows, so a cached copy is never older than its marker says.

Chunks are complete Arrow IPC streams (schema and one record batch) of at most about CHUNK_BYTES, so
each fits a gRPC message and decodes on its own; every table sends at least one, possibly empty, so its
columns arrive even when the owner has no rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from sqlalchemy import Executable, Table
from sqlalchemy.orm import Session, sessionmaker

from stash_common.db import transaction
from stash_common.owner_versions import owner_version

CHUNK_ROWS = 5000
CHUNK_BYTES = 4 * 1024 * 1024
UTC_TIME = pa.timestamp("us", tz="UTC")


@dataclass(frozen=True)
class OwnerTable:
    """One table of the gateway's SQL: its name, its Arrow schema, and a reader of one owner's record batches
    (`row_batches` makes them from rows in the schema's column order)."""

    name: str
    schema: pa.Schema
    batches: Callable[[Session, str], Iterable[pa.RecordBatch]]


@dataclass(frozen=True)
class TableChunk:
    """One chunk of a table of one owner, with the owner's change marker as read before the rows."""

    table: str
    data: bytes
    version: str


def stream_tables(
    sessions: sessionmaker[Session], versions: Table, tables: Sequence[OwnerTable], owner_id: str
) -> Iterator[TableChunk]:
    """Every table's rows of one owner in one read transaction, the marker read first (on PostgreSQL one
    snapshot for all the tables; SQLite reads each statement at its own moment)."""
    with transaction(sessions) as session:
        if session.get_bind().dialect.name == "postgresql":
            session.connection(execution_options={"isolation_level": "REPEATABLE READ"})
        version = owner_version(session, versions, owner_id)
        for table in tables:
            for data in arrow_chunks(table.schema, table.batches(session, owner_id)):
                yield TableChunk(table.name, data, version)


def selected_rows(session: Session, query: Executable) -> Iterator[Sequence[Sequence[Any]]]:
    """A Core query's rows, CHUNK_ROWS at a time (through a server-side cursor on PostgreSQL)."""
    return session.connection().execute(query.execution_options(yield_per=CHUNK_ROWS)).partitions()


def row_batches(schema: pa.Schema, blocks: Iterable[Sequence[Sequence[Any]]]) -> Iterator[pa.RecordBatch]:
    """Blocks of rows in the schema's column order as record batches, converted column-wise by Arrow."""
    # Arrow converts a list of tuples to a struct array in one call; extension columns (JSON) go through
    # their storage type.
    storage = pa.struct([pa.field(field.name, _storage(field.type)) for field in schema])
    for block in blocks:
        columns = pa.RecordBatch.from_struct_array(pa.array([tuple(row) for row in block], type=storage)).columns
        yield pa.RecordBatch.from_arrays(
            [_typed(column, field.type) for column, field in zip(columns, schema, strict=True)], schema=schema
        )


def _storage(kind: pa.DataType) -> pa.DataType:
    return kind.storage_type if isinstance(kind, pa.BaseExtensionType) else kind


def _typed(column: pa.Array, kind: pa.DataType) -> pa.Array:
    return pa.ExtensionArray.from_storage(kind, column) if isinstance(kind, pa.BaseExtensionType) else column


def arrow_chunks(schema: pa.Schema, batches: Iterable[pa.RecordBatch]) -> Iterator[bytes]:
    """The batches as Arrow IPC chunks of about CHUNK_BYTES each; at least one, possibly empty."""
    sent = False
    for batch in batches:
        for part in _parts(batch):
            sent = True
            yield _ipc(schema, part)
    if not sent:
        yield _ipc(schema, pa.RecordBatch.from_pylist([], schema=schema))


def _parts(batch: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
    """Slices of the batch of about CHUNK_BYTES each (slices share the batch's buffers)."""
    step = max(1, batch.num_rows * CHUNK_BYTES // max(batch.nbytes, 1))
    for start in range(0, batch.num_rows, step):
        yield batch.slice(start, step)


def _ipc(schema: pa.Schema, batch: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as writer:
        writer.write_batch(batch)
    return bytes(sink.getvalue())


def read_chunks(chunks: Iterable[bytes]) -> pa.Table:
    """The table that a table's chunks make together (they share one schema)."""
    tables = [pa.ipc.open_stream(chunk).read_all() for chunk in chunks]
    return pa.concat_tables(tables)
