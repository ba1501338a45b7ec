"""Trigger bookkeeping in the store: cursors, waiting windows, pauses, daemons, and (inherited) requests.

Exactly-once rests on the database, not on memory: a consumer run request is
unique per (flow, key, generation); new events join the open request of a
key until its run is claimed; claiming is a conditional update only one
daemon can win; the run id is chosen at claim time, and the runs table's
primary key stops a second start of the same run.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlalchemy.exc import IntegrityError

from partita.errors import StoreError
from partita.store.schema import (
    daemons,
    event_ids_text,
    events,
    flow_state,
    trigger_cursors,
    trigger_requests,
    trigger_waiting,
)
from partita.store.trigger_requests import TriggerLaunch, TriggerRequest, TriggerRequests

__all__ = [
    "DaemonRecord",
    "EventPosition",
    "NewEvents",
    "TriggerLaunch",
    "TriggerRequest",
    "TriggerStore",
    "WaitingKey",
]

_CHUNK = 500

#: Every transaction with a smaller id has ended (committed or rolled back).
_SETTLED_TXID = "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint"


@dataclass(frozen=True, slots=True, order=True)
class EventPosition:
    """Where a reader of the event log stands, in commit order.

    ``txid`` is the inserting transaction's id on PostgreSQL and 0 on SQLite
    (whose ids already follow commit order); events sort by (txid, event_id).
    """

    txid: int = 0
    event_id: int = 0


@dataclass(frozen=True, slots=True)
class NewEvents:
    """What a trigger pass reads of the event log (`TriggerStore.read_new_events`).

    ``events``: (position, asset, key) of the settled events, in commit order.
    ``held_back``: the position of the first event already committed that
    cannot be read yet because a transaction older than its own is still in
    progress (PostgreSQL only; None when there is none).
    """

    events: list[tuple[EventPosition, str, str | None]]
    held_back: EventPosition | None


@dataclass(frozen=True, slots=True)
class WaitingKey:
    flow: str
    partition_key: str
    first_seen: float
    event_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class DaemonRecord:
    """One trigger daemon as the store knows it (times in POSIX seconds); ``stopped_at`` is None while it serves."""

    daemon_id: str
    host: str
    pid: int
    started_at: float
    heartbeat_at: float
    stopped_at: float | None


class TriggerStore(TriggerRequests):
    """Trigger verbs on top of a `SqlStore`'s database: a pass's reads and writes, and the request verbs."""

    # -- cursors and pauses ----------------------------------------------------

    def cursor(self, flow: str) -> tuple[EventPosition, float | None]:
        """The position of the last event the flow consumed, and its last schedule tick."""
        query = f"SELECT last_event_txid, last_event_id, last_tick FROM {trigger_cursors.name} WHERE flow = ?"
        with self._failures("read the trigger cursor"):
            rows = self._database.read(self._database.driver_sql(query), (flow,))
        if not rows:
            return EventPosition(), None
        txid, event_id, last_tick = rows[0]
        return EventPosition(int(txid), int(event_id)), last_tick

    def knows_flow(self, flow: str) -> bool:
        """Whether the store holds trigger state of ``flow``: it was paused, evaluated or started a run."""
        with self._failures("read the flow state"), self._database.connect() as connection:
            for column in (flow_state.c.flow, trigger_cursors.c.flow, trigger_requests.c.flow):
                if connection.execute(select(column).where(column == flow).limit(1)).first() is not None:
                    return True
        return False

    def pass_position(self, flow: str) -> tuple[bool, EventPosition, float | None]:
        """Whether the flow is paused, and its cursor and last tick (`cursor`): one read for a pass."""
        query = (
            "SELECT s.paused, c.last_event_txid, c.last_event_id, c.last_tick "
            f"FROM (SELECT CAST(? AS TEXT) AS flow) AS f LEFT JOIN {flow_state.name} s ON s.flow = f.flow "
            f"LEFT JOIN {trigger_cursors.name} c ON c.flow = f.flow"
        )
        with self._failures("read the flow state"):
            ((paused, txid, event_id, last_tick),) = self._database.read(self._database.driver_sql(query), (flow,))
        if txid is None:
            return bool(paused), EventPosition(), None
        return bool(paused), EventPosition(int(txid), int(event_id)), last_tick

    def is_paused(self, flow: str) -> bool:
        query = f"SELECT paused FROM {flow_state.name} WHERE flow = ?"
        with self._failures("read the flow state"):
            rows = self._database.read(self._database.driver_sql(query), (flow,))
        return bool(rows and rows[0][0])

    def set_paused(self, flow: str, paused: bool, now: float) -> None:
        statement = (
            f"INSERT INTO {flow_state.name} (flow, paused, changed_at) VALUES (?, ?, ?) "
            "ON CONFLICT (flow) DO UPDATE SET paused = excluded.paused, changed_at = excluded.changed_at"
        )
        with self._failures("change the flow state"), self._database.write() as connection:
            connection.exec_driver_sql(self._database.driver_sql(statement), (flow, paused, now))

    # -- events ----------------------------------------------------------------

    def new_events(
        self, assets: Sequence[str], after: EventPosition, limit: int = 10_000
    ) -> list[tuple[EventPosition, str, str | None]]:
        """(position, asset, key) of the settled events after ``after`` for ``assets``, in commit order.

        `read_new_events`'s events, without what it says about events held back.
        """
        return self.read_new_events(assets, after, limit).events

    def read_new_events(self, assets: Sequence[str], after: EventPosition, limit: int = 10_000) -> NewEvents:
        """The settled events after ``after`` for ``assets`` in commit order, and the first one held back.

        SQLite commits one writer at a time, so event ids follow commit order.
        PostgreSQL assigns an id when a transaction inserts and shows the row
        when it commits: a smaller id can appear after a larger one was read.
        There events are read in (transaction id, id) order and only from
        transactions older than every transaction still in progress (the
        snapshot's xmin, read in a statement of its own before the rows are),
        so no event can later appear behind the cursor. An event waits until
        every older transaction has ended, a long one included. The same
        statement finds the first committed event that waits so (`NewEvents.held_back`):
        the end of the transactions holding it back is announced to nobody,
        so a reader woken by its notification must look again by itself.
        """
        names = list(assets)
        if not names:  # nothing to read; PostgreSQL would reject the empty IN ()
            return NewEvents([], None)
        placeholders = ", ".join("?" * len(names))
        held_back: EventPosition | None = None
        # Plain DBAPI rows: a pass after a burst reads thousands, and SQLAlchemy rows would cost more than the query.
        with self._failures("read new events"):
            if self._database.dialect != "postgresql":
                rows = self._database.read(
                    f"SELECT 0, id, asset, partition_key FROM {events.name} "
                    f"WHERE asset IN ({placeholders}) AND id > ? ORDER BY id LIMIT ?",
                    (*names, after.event_id, limit),
                )
            else:
                with self._database.connect() as connection:
                    settled = int(connection.exec_driver_sql(_SETTLED_TXID).scalar_one())
                    # The settled events, then the first one held back (its txid sorts it last).
                    select_after = (
                        f"SELECT txid, id, asset, partition_key FROM {events.name} "
                        f"WHERE (txid, id) > (?, ?) AND asset IN ({placeholders})"
                    )
                    bounds = (after.txid, after.event_id, *names, settled)
                    rows = self._database.rows(
                        connection,
                        f"({select_after} AND txid < ? ORDER BY txid, id LIMIT ?) "
                        f"UNION ALL ({select_after} AND txid >= ? ORDER BY txid, id LIMIT 1) ORDER BY txid, id",
                        (*bounds, limit, *bounds),
                    )
                if rows and int(rows[-1][0]) >= settled:
                    txid, event_id, _, _ = rows.pop()
                    held_back = EventPosition(int(txid), int(event_id))
        found = [(EventPosition(int(txid), int(event_id)), asset, key) for txid, event_id, asset, key in rows]
        return NewEvents(found, held_back)

    def keys_with_events(self, asset: str, keys: Iterable[str]) -> set[str]:
        """Which of ``keys`` have at least one event of ``asset``."""
        wanted = list(dict.fromkeys(keys))
        present: set[str] = set()
        with self._failures("read event keys"):
            for start in range(0, len(wanted), _CHUNK):
                chunk = wanted[start : start + _CHUNK]
                rows = self._database.read(
                    self._database.driver_sql(
                        f"SELECT DISTINCT partition_key FROM {events.name} "
                        f"WHERE asset = ? AND partition_key IN ({', '.join('?' * len(chunk))})"
                    ),
                    (asset, *chunk),
                )
                present.update(row[0] for row in rows)
        return present

    def has_event(self, asset: str) -> bool:
        with self._failures("read events"), self._database.connect() as connection:
            return connection.execute(select(events.c.id).where(events.c.asset == asset).limit(1)).first() is not None

    # -- one evaluation pass ----------------------------------------------------

    def record_pass(
        self,
        flow: str,
        ready: dict[str, list[int]],
        waiting: dict[str, list[int]],
        expected_cursor: EventPosition,
        cursor: EventPosition,
        last_tick: float | None,
        now: float,
    ) -> bool:
        """Open or extend requests for ready keys, remember waiting keys, advance the cursor: one transaction.

        Returns False (recording nothing) when the cursor no longer is the one
        the pass read: another daemon evaluated these events first.
        """
        try:
            with self._failures("record the trigger pass"), self._database.driver_write() as connection:
                if not self._cursor_unchanged(connection, flow, expected_cursor):
                    return False
                self._record(connection, flow, ready, waiting, now)
                connection.exec_driver_sql(  # the row exists: _cursor_unchanged created it
                    self._database.driver_sql(
                        f"UPDATE {trigger_cursors.name} SET last_event_txid = ?, last_event_id = ?, last_tick = ? "
                        "WHERE flow = ?"
                    ),
                    (cursor.txid, cursor.event_id, last_tick, flow),
                )
        except StoreError as exc:
            if isinstance(exc.__cause__, (IntegrityError, sqlite3.IntegrityError)):
                return False  # two first passes raced to create the cursor
            raise
        return True

    def _cursor_unchanged(self, connection: Any, flow: str, expected: EventPosition) -> bool:
        """Lock the flow's cursor row and compare it with what the pass read.

        The row is created first if missing: a lock on a row that does not
        exist yet serializes nothing, and two first passes of a new flow
        would both go ahead. A second creator waits for the first one's
        transaction and then sees its cursor. (SQLite's write lock, taken
        when the transaction began, already serializes passes.)
        """
        query = self._database.driver_sql(
            f"SELECT last_event_txid, last_event_id FROM {trigger_cursors.name} WHERE flow = ?"
            + (" FOR UPDATE" if self._database.dialect == "postgresql" else "")
        )
        row = connection.exec_driver_sql(query, (flow,)).fetchone()
        if row is None:  # the flow's first pass
            connection.exec_driver_sql(
                self._database.driver_sql(
                    f"INSERT INTO {trigger_cursors.name} (flow, last_event_id, last_tick) VALUES (?, 0, NULL) "
                    "ON CONFLICT (flow) DO NOTHING"
                ),
                (flow,),
            )
            row = connection.exec_driver_sql(query, (flow,)).fetchone()
        return row is not None and EventPosition(int(row[0]), int(row[1])) == expected

    def _record(
        self, connection: Any, flow: str, ready: dict[str, list[int]], waiting: dict[str, list[int]], now: float
    ) -> None:
        """Set-based: a few statements per chunk of keys, not several per key (a pass may see 10,000 keys)."""
        self._record_ready(connection, flow, ready, now)
        self._record_waiting(connection, flow, waiting, now)

    def _record_ready(self, connection: Any, flow: str, ready: dict[str, list[int]], now: float) -> None:
        """Open a request for each ready key, or add its events to the key's open request."""
        sql = self._database.driver_sql
        requests_table, waiting_table = trigger_requests.name, trigger_waiting.name
        ready_keys = list(ready)
        for start in range(0, len(ready_keys), _CHUNK):
            chunk = ready_keys[start : start + _CHUNK]
            marks = ", ".join("?" * len(chunk))
            params = (flow, *chunk)
            # The events that arrived while a key waited trigger its run too.
            earlier = self._waiting_events(connection, flow, chunk)
            # Each key's newest generation and its open request, if any (at most one is pending).
            generations, pending_ids = {}, []
            for key, generation, pending_id in connection.exec_driver_sql(
                sql(
                    f"SELECT partition_key, MAX(generation), MAX(CASE WHEN status = 'pending' THEN id END) "
                    f"FROM {requests_table} WHERE flow = ? AND partition_key IN ({marks}) GROUP BY partition_key"
                ),
                params,
            ):
                generations[key] = int(generation)
                if pending_id is not None:
                    pending_ids.append(pending_id)
            open_requests = self._open_requests(connection, pending_ids)
            extended, created = [], []
            for key in chunk:
                ids = [*earlier.get(key, ()), *ready[key]]
                if key in open_requests:  # not claimed yet: the new events join it
                    request_id, known = open_requests[key]
                    extended.append((event_ids_text({*known, *ids}), request_id))
                else:
                    created.append((flow, key, generations.get(key, -1) + 1, event_ids_text(ids), now))
            if extended:
                connection.exec_driver_sql(sql(f"UPDATE {requests_table} SET event_ids = ? WHERE id = ?"), extended)
            if created:
                connection.exec_driver_sql(
                    sql(
                        f"INSERT INTO {requests_table} (flow, partition_key, generation, status, event_ids, created_at) "
                        "VALUES (?, ?, ?, 'pending', ?, ?)"
                    ),
                    created,
                )
            if earlier:
                connection.exec_driver_sql(
                    sql(f"DELETE FROM {waiting_table} WHERE flow = ? AND partition_key IN ({marks})"), params
                )

    def _open_requests(self, connection: Any, ids: list[int]) -> dict[str, tuple[int, list[int]]]:
        """Key -> (id, event ids) of those of the given requests still pending (none: no read).

        Locked until the pass commits on PostgreSQL: a run's start that claims
        one meanwhile waits, then finds events joined it and claims nothing
        (`RequestClaim`); one claimed first is no longer pending here, and
        its key's new events open the next generation. SQLite's write lock
        serializes the two anyway.
        """
        if not ids:
            return {}
        query = (
            f"SELECT id, partition_key, event_ids FROM {trigger_requests.name} "
            f"WHERE id IN ({', '.join('?' * len(ids))}) AND status = 'pending'"
        )
        if self._database.dialect == "postgresql":
            query += " FOR UPDATE"
        return {
            row[1]: (int(row[0]), json.loads(row[2]))
            for row in connection.exec_driver_sql(self._database.driver_sql(query), tuple(ids))
        }

    def _record_waiting(self, connection: Any, flow: str, waiting: dict[str, list[int]], now: float) -> None:
        """Remember the keys still waiting, with every event they have been waiting with."""
        sql = self._database.driver_sql
        waiting_table = trigger_waiting.name
        waiting_keys = list(waiting)
        for start in range(0, len(waiting_keys), _CHUNK):
            chunk = waiting_keys[start : start + _CHUNK]
            known = self._waiting_events(connection, flow, chunk)
            fresh = [(flow, key, now, event_ids_text(waiting[key])) for key in chunk if key not in known]
            grown = [
                (event_ids_text({*known[key], *waiting[key]}), flow, key) for key in chunk if key in known
            ]
            if fresh:
                connection.exec_driver_sql(
                    sql(
                        f"INSERT INTO {waiting_table} (flow, partition_key, first_seen, event_ids) VALUES (?, ?, ?, ?)"
                    ),
                    fresh,
                )
            if grown:
                connection.exec_driver_sql(
                    sql(f"UPDATE {waiting_table} SET event_ids = ? WHERE flow = ? AND partition_key = ?"), grown
                )

    def _waiting_events(self, connection: Any, flow: str, keys: Sequence[str]) -> dict[str, list[int]]:
        """The event ids each of ``keys`` (at most one chunk) has been waiting with."""
        query = (
            f"SELECT partition_key, event_ids FROM {trigger_waiting.name} "
            f"WHERE flow = ? AND partition_key IN ({', '.join('?' * len(keys))})"
        )
        return {
            row[0]: json.loads(row[1])
            for row in connection.exec_driver_sql(self._database.driver_sql(query), (flow, *keys))
        }

    def record_schedule(self, flow: str, keys: Sequence[str], last_tick: float, now: float) -> None:
        """One request per elapsed schedule key (generation 0: a key is scheduled once)."""
        sql = self._database.driver_sql
        with self._failures("record schedule keys"), self._database.write() as connection:
            if keys:
                # The unique (flow, key, generation) constraint skips keys already requested.
                connection.exec_driver_sql(
                    sql(
                        f"INSERT INTO {trigger_requests.name} "
                        "(flow, partition_key, generation, status, event_ids, created_at) "
                        "VALUES (?, ?, 0, 'pending', '[]', ?) ON CONFLICT (flow, partition_key, generation) DO NOTHING"
                    ),
                    [(flow, key, now) for key in keys],
                )
            # A new cursor starts before every event; an existing one keeps its event position.
            connection.exec_driver_sql(
                sql(
                    f"INSERT INTO {trigger_cursors.name} (flow, last_event_id, last_tick) VALUES (?, 0, ?) "
                    "ON CONFLICT (flow) DO UPDATE SET last_tick = excluded.last_tick"
                ),
                (flow, last_tick),
            )

    # -- requests ----------------------------------------------------------------
    def waiting(self, flow: str) -> list[WaitingKey]:
        query = select(trigger_waiting).where(trigger_waiting.c.flow == flow).order_by(trigger_waiting.c.first_seen)
        with self._failures("read waiting keys"), self._database.connect() as connection:
            return [
                WaitingKey(row.flow, row.partition_key, row.first_seen, tuple(json.loads(row.event_ids)))
                for row in connection.execute(query)
            ]

    def request_counts(self, flow: str) -> dict[str, int]:
        """The flow's consumer run requests per status (``pending``, ``claimed`` ...), counted over the (flow, status) index."""
        query = (
            select(trigger_requests.c.status, func.count())
            .where(trigger_requests.c.flow == flow)
            .group_by(trigger_requests.c.status)
        )
        with self._failures("count trigger requests"), self._database.connect() as connection:
            return {status: int(count) for status, count in connection.execute(query)}

    def waiting_count(self, flow: str) -> int:
        """How many consumer keys of the flow wait for more upstream events."""
        query = select(func.count()).select_from(trigger_waiting).where(trigger_waiting.c.flow == flow)
        with self._failures("count waiting keys"), self._database.connect() as connection:
            return int(connection.execute(query).scalar_one())

    # -- daemons -----------------------------------------------------------------

    def daemons(self, limit: int = 20) -> list[DaemonRecord]:
        """The daemons that served this store, newest heartbeat first (at most ``limit``)."""
        query = select(daemons).order_by(daemons.c.heartbeat_at.desc()).limit(limit)
        with self._failures("read daemons"), self._database.connect() as connection:
            return [
                DaemonRecord(row.daemon_id, row.host, int(row.pid), row.started_at, row.heartbeat_at, row.stopped_at)
                for row in connection.execute(query)
            ]

    def daemon_started(self, daemon_id: str, host: str, pid: int, now: float) -> None:
        with self._failures("register the daemon"), self._database.write() as connection:
            connection.execute(
                insert(daemons).values(daemon_id=daemon_id, host=host, pid=pid, started_at=now, heartbeat_at=now)
            )

    def daemon_heartbeat(self, daemon_id: str, now: float, *, stopped: bool = False) -> None:
        values: dict[str, Any] = {"heartbeat_at": now}
        if stopped:
            values["stopped_at"] = now
        with self._failures("record the daemon heartbeat"), self._database.write() as connection:
            connection.execute(update(daemons).where(daemons.c.daemon_id == daemon_id).values(**values))
