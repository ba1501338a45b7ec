"""`SqlPartitionRegistry`: the keys runtime domains' producers discovered, and each key's history.

A producer's discovery events and the registry update commit together, so
the registry never knows a key whose discovery event is missing (or the
reverse). Retiring and reactivating a key is recorded in its history.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from sqlalchemy import select, update

from partita.errors import UnknownPartitionError
from partita.events.model import EventDraft
from partita.store.database import Database
from partita.store.protocol import PartitionRecord
from partita.store.rows import event_row, utc_datetime
from partita.store.schema import events, partition_history, partitions

__all__ = ["SqlPartitionRegistry"]


def _partition_of(row: Any) -> PartitionRecord:
    return PartitionRecord(
        domain=row.domain,
        key=row.partition_key,
        first_seen=utc_datetime(row.first_seen),  # type: ignore[arg-type]
        last_seen=utc_datetime(row.last_seen),  # type: ignore[arg-type]
        retired=bool(row.retired),
        retired_at=utc_datetime(row.retired_at),
        reactivated_at=utc_datetime(row.reactivated_at),
        last_run_id=row.last_run_id,
    )


class SqlPartitionRegistry:
    """The `PartitionRegistry` of a `Database`."""

    def __init__(self, database: Database) -> None:
        self._database = database
        self._failures = database.failures
        # A rediscovered key keeps its first-seen time and becomes active again.
        self._upsert = database.upsert_sql(
            partitions, ("domain", "partition_key"), {"last_seen", "last_run_id", "retired"}
        )

    def record_discovery(self, domain: str, run_id: str, drafts: Sequence[EventDraft]) -> None:
        """Discovery events and the registry update in one transaction.

        New keys get a first-seen time; known keys a new last-seen time; a
        retired key discovered again becomes active, and that is recorded in
        the key's history.
        """
        now = dt.datetime.now(dt.UTC).timestamp()
        keys = [draft.partition_key for draft in drafts]
        database = self._database
        with self._failures("record the discovery"), database.write() as connection:
            if drafts:
                database.insert(connection, events, [event_row(draft) for draft in drafts], skip=1)
            retired = {
                row[0]
                for row in connection.execute(
                    select(partitions.c.partition_key).where(partitions.c.domain == domain, partitions.c.retired)
                )
            }
            rows = [(domain, key, now, now, False, None, None, run_id) for key in keys]
            if rows:
                database.upsert(connection, self._upsert, rows)
            back = [key for key in keys if key in retired]
            if back:
                connection.execute(
                    update(partitions)
                    .where(partitions.c.domain == domain, partitions.c.partition_key.in_(back))
                    .values(reactivated_at=now)
                )
                connection.execute(
                    partition_history.insert(),
                    [
                        {"domain": domain, "partition_key": key, "action": "reactivated", "at": now, "run_id": run_id}
                        for key in back
                    ],
                )

    def list_partitions(self, domain: str, *, limit: int | None = None, offset: int = 0) -> list[PartitionRecord]:
        """Every key the domain's producers ever discovered, in first-seen order; a page of them with ``limit``."""
        query = (
            select(partitions)
            .where(partitions.c.domain == domain)
            .order_by(partitions.c.first_seen, partitions.c.partition_key)
            .limit(limit)
            .offset(offset or None)
        )
        with self._failures("list partitions"), self._database.connect() as connection:
            return [_partition_of(row) for row in connection.execute(query)]

    def retire_partition(self, domain: str, key: str) -> PartitionRecord:
        """Mark a known key retired (recorded in its history); retiring it again changes nothing."""
        now = dt.datetime.now(dt.UTC).timestamp()
        this_key = (partitions.c.domain == domain, partitions.c.partition_key == key)
        with self._failures("retire the partition"), self._database.write() as connection:
            row = connection.execute(select(partitions).where(*this_key)).first()
            if row is None:
                raise UnknownPartitionError(
                    f"domain {domain} has no known partition with that key; `partita partitions ENTRY --domain` "
                    "lists the known keys"
                )
            if not row.retired:
                connection.execute(update(partitions).where(*this_key).values(retired=True, retired_at=now))
                connection.execute(
                    partition_history.insert().values(domain=domain, partition_key=key, action="retired", at=now)
                )
            row = connection.execute(select(partitions).where(*this_key)).one()
        return _partition_of(row)

    def partition_history(self, domain: str, key: str) -> list[tuple[str, dt.datetime, str | None]]:
        """(action, time, run id) transitions of one key, oldest first."""
        query = (
            select(partition_history.c.action, partition_history.c.at, partition_history.c.run_id)
            .where(partition_history.c.domain == domain, partition_history.c.partition_key == key)
            .order_by(partition_history.c.id)
        )
        with self._failures("read the partition history"), self._database.connect() as connection:
            rows = connection.execute(query)
            return [(action, utc_datetime(at), run) for action, at, run in rows]  # type: ignore[misc]
