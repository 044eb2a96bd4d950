"""The two owner-row RPCs, answered alike by every service that keeps owner rows (ingest, labeler, scorer).

A service's servicer inherits `OwnerRowsServicer` ahead of its generated base, sets `sessions`, and names
its change-marker table (`owner_versions`) and the module that declares its query tables as `TABLES`
(`owner_tables`). That module is imported by the first SQL query, not at start: it loads pyarrow.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import ClassVar

import grpc
from sqlalchemy import Table
from sqlalchemy.orm import Session, sessionmaker

from stash.rm.v1 import common_pb2
from stash_common.db import transaction
from stash_common.owner_versions import owner_version
from stash_common.requests import owner_of


class OwnerRowsServicer:
    """StreamOwnerRows and GetOwnerVersion over one service's own tables (see `stash_common.owner_rows`)."""

    sessions: sessionmaker[Session]
    owner_versions: ClassVar[Table]
    owner_tables: ClassVar[str]

    def StreamOwnerRows(
        self, request: common_pb2.StreamOwnerRowsRequest, context: grpc.ServicerContext
    ) -> Iterator[common_pb2.StreamOwnerRowsResponse]:
        """The owner's rows of every query table as Arrow IPC chunks, for the gateway's SQL queries."""
        from stash_common.owner_rows import stream_tables

        tables = importlib.import_module(self.owner_tables).TABLES
        for chunk in stream_tables(self.sessions, self.owner_versions, tables, owner_of(request)):
            yield common_pb2.StreamOwnerRowsResponse(table=chunk.table, arrow_ipc=chunk.data, version=chunk.version)

    def GetOwnerVersion(
        self, request: common_pb2.GetOwnerVersionRequest, context: grpc.ServicerContext
    ) -> common_pb2.GetOwnerVersionResponse:
        """The owner's change marker for the tables StreamOwnerRows sends."""
        with transaction(self.sessions) as session:
            version = owner_version(session, self.owner_versions, owner_of(request))
            return common_pb2.GetOwnerVersionResponse(version=version)
