"""Each owner's change marker in a service's own table: replaced by every write of the owner's rows, compared by
the gateway with the marker of its cached copy (see `stash_common.owner_rows`).

Apart from the Arrow streams, so that the writes that touch a marker do not load pyarrow into every service.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from stash_common.db import new_id


def touch_owners(session: Session, table: Table, owner_ids: Iterable[str]) -> None:
    """Give each owner a new change marker in the session's transaction (in sorted order: one lock order)."""
    insert = postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert
    for owner_id in sorted(set(owner_ids)):
        statement = insert(table).values(owner_id=owner_id, version=new_id())
        session.execute(
            statement.on_conflict_do_update(index_elements=["owner_id"], set_={"version": statement.excluded.version})
        )


def owner_version(session: Session, table: Table, owner_id: str) -> str:
    """The owner's change marker; empty while the owner has never changed anything."""
    row = session.execute(table.select().where(table.c.owner_id == owner_id)).first()
    return str(row.version) if row is not None else ""
