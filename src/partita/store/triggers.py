"""Trigger bookkeeping in the store: requests, cursors, waiting windows, pauses, daemons.

Exactly-once rests on the database, not on memory: a consumer run request is
unique per (flow, key, generation); new events join the open request of a
key until its run is claimed; claiming is a conditional update only one
daemon can win; the run id is chosen at claim time, and the runs table's
primary key stops a second start of the same run.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError

from partita.errors import StoreError
from partita.store.schema import (
    daemons,
    events,
    flow_state,
    runs,
    trigger_cursors,
    trigger_requests,
    trigger_runs,
    trigger_waiting,
)
from partita.store.sql import SqlStore

__all__ = ["EventPosition", "TriggerLaunch", "TriggerRequest", "TriggerStore", "WaitingKey"]

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
class TriggerRequest:
    id: int
    flow: str
    partition_key: str
    generation: int
    status: str
    event_ids: tuple[int, ...]
    run_id: str | None
    created_at: float
    claimed_at: float | None
    #: Runs started for the request so far (a follow-up of an interrupted run is one more).
    tries: int = 0
    #: Starts that failed in a row; the next is not tried before ``not_before``.
    start_failures: int = 0
    not_before: float | None = None
    last_error: str | None = None
    #: Set (in memory, never stored) on a claim whose run was interrupted: a follow-up run is due.
    interrupted: bool = False


@dataclass(frozen=True, slots=True)
class TriggerLaunch:
    """A consumer run's launch: its flow and request, which try it is, and the interrupted run it follows."""

    flow: str
    request_id: int
    attempt: int
    follows_run_id: str | None


@dataclass(frozen=True, slots=True)
class WaitingKey:
    flow: str
    partition_key: str
    first_seen: float
    event_ids: tuple[int, ...]


def _request(row: Any) -> TriggerRequest:
    return TriggerRequest(
        id=int(row.id),
        flow=row.flow,
        partition_key=row.partition_key,
        generation=row.generation,
        status=row.status,
        event_ids=tuple(json.loads(row.event_ids)),
        run_id=row.run_id,
        created_at=row.created_at,
        claimed_at=row.claimed_at,
        tries=int(row.tries),
        start_failures=int(row.start_failures),
        not_before=row.not_before,
        last_error=row.last_error,
    )


class TriggerStore:
    """Trigger verbs on top of a `SqlStore`'s database."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self._engine = store._engine  # noqa: SLF001 - same database, trigger tables

    # -- cursors and pauses ----------------------------------------------------

    def cursor(self, flow: str) -> tuple[EventPosition, float | None]:
        """The position of the last event the flow consumed, and its last schedule tick."""
        with self.store._failures("read the trigger cursor"), self._engine.connect() as connection:  # noqa: SLF001
            row = connection.execute(select(trigger_cursors).where(trigger_cursors.c.flow == flow)).first()
        if row is None:
            return EventPosition(), None
        return EventPosition(int(row.last_event_txid), int(row.last_event_id)), row.last_tick

    def is_paused(self, flow: str) -> bool:
        with self.store._failures("read the flow state"), self._engine.connect() as connection:  # noqa: SLF001
            row = connection.execute(select(flow_state.c.paused).where(flow_state.c.flow == flow)).first()
        return bool(row and row[0])

    def set_paused(self, flow: str, paused: bool, now: float) -> None:
        statement = (
            f"INSERT INTO {flow_state.name} (flow, paused, changed_at) VALUES (?, ?, ?) "
            "ON CONFLICT (flow) DO UPDATE SET paused = excluded.paused, changed_at = excluded.changed_at"
        )
        with self.store._failures("change the flow state"), self.store._write() as connection:  # noqa: SLF001
            connection.exec_driver_sql(self.store.driver_sql(statement), (flow, paused, now))

    # -- events ----------------------------------------------------------------

    def new_events(
        self, assets: Sequence[str], after: EventPosition, limit: int = 10_000
    ) -> list[tuple[EventPosition, str, str | None]]:
        """(position, asset, key) of the settled events after ``after`` for ``assets``, in commit order.

        SQLite commits one writer at a time, so event ids follow commit order.
        PostgreSQL assigns an id when a transaction inserts and shows the row
        when it commits: a smaller id can appear after a larger one was read.
        There events are read in (transaction id, id) order and only from
        transactions older than every transaction still in progress (the
        snapshot's xmin, read in a statement of its own before the rows are),
        so no event can later appear behind the cursor. An event waits until
        every older transaction has ended, a long one included.
        """
        names = list(assets)
        with self.store._failures("read new events"), self._engine.connect() as connection:  # noqa: SLF001
            if self.store.dialect != "postgresql":
                query = (
                    select(events.c.id, events.c.asset, events.c.partition_key)
                    .where(events.c.asset.in_(names), events.c.id > after.event_id)
                    .order_by(events.c.id)
                    .limit(limit)
                )
                return [(EventPosition(0, int(row[0])), row[1], row[2]) for row in connection.execute(query)]
            settled = connection.exec_driver_sql(_SETTLED_TXID).scalar_one()
            rows = connection.exec_driver_sql(
                f"SELECT txid, id, asset, partition_key FROM {events.name} "
                f"WHERE (txid, id) > (%s, %s) AND txid < %s AND asset IN ({', '.join(['%s'] * len(names))}) "
                "ORDER BY txid, id LIMIT %s",
                (after.txid, after.event_id, int(settled), *names, limit),
            )
            return [(EventPosition(int(row[0]), int(row[1])), row[2], row[3]) for row in rows]

    def keys_with_events(self, asset: str, keys: Iterable[str]) -> set[str]:
        """Which of ``keys`` have at least one event of ``asset``."""
        wanted = list(dict.fromkeys(keys))
        present: set[str] = set()
        with self.store._failures("read event keys"), self._engine.connect() as connection:  # noqa: SLF001
            for start in range(0, len(wanted), _CHUNK):
                chunk = wanted[start : start + _CHUNK]
                query = self.store.driver_sql(
                    f"SELECT DISTINCT partition_key FROM {events.name} "
                    f"WHERE asset = ? AND partition_key IN ({', '.join('?' * len(chunk))})"
                )
                present.update(row[0] for row in connection.exec_driver_sql(query, (asset, *chunk)))
        return present

    def has_event(self, asset: str) -> bool:
        with self.store._failures("read events"), self._engine.connect() as connection:  # noqa: SLF001
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
            with self.store._failures("record the trigger pass"), self.store._write() as connection:  # noqa: SLF001
                if not self._cursor_unchanged(connection, flow, expected_cursor):
                    return False
                self._record(connection, flow, ready, waiting, now)
                connection.exec_driver_sql(  # the row exists: _cursor_unchanged created it
                    self.store.driver_sql(
                        f"UPDATE {trigger_cursors.name} SET last_event_txid = ?, last_event_id = ?, last_tick = ? "
                        "WHERE flow = ?"
                    ),
                    (cursor.txid, cursor.event_id, last_tick, flow),
                )
        except StoreError as exc:
            if isinstance(exc.__cause__, IntegrityError):
                return False  # two first passes raced to create the cursor
            raise
        return True

    def _cursor_unchanged(self, connection: Any, flow: str, expected: EventPosition) -> bool:
        """Lock the flow's cursor row and compare it with what the pass read.

        The row is created first if missing: a lock on a row that does not
        exist yet serializes nothing, and two first passes of a new flow
        would both go ahead. A second creator waits for the first one's
        transaction and then sees its cursor.
        """
        connection.exec_driver_sql(
            self.store.driver_sql(
                f"INSERT INTO {trigger_cursors.name} (flow, last_event_id, last_tick) VALUES (?, 0, NULL) "
                "ON CONFLICT (flow) DO NOTHING"
            ),
            (flow,),
        )
        query = select(trigger_cursors.c.last_event_txid, trigger_cursors.c.last_event_id).where(
            trigger_cursors.c.flow == flow
        )
        if self.store.dialect == "postgresql":
            query = query.with_for_update()
        row = connection.execute(query).first()
        return row is not None and EventPosition(int(row[0]), int(row[1])) == expected

    def _record(
        self, connection: Any, flow: str, ready: dict[str, list[int]], waiting: dict[str, list[int]], now: float
    ) -> None:
        """Set-based: a few statements per chunk of keys, not several per key (a pass may see 10,000 keys)."""
        sql = self.store.driver_sql
        requests_table, waiting_table = trigger_requests.name, trigger_waiting.name
        ready_keys = list(ready)
        for start in range(0, len(ready_keys), _CHUNK):
            chunk = ready_keys[start : start + _CHUNK]
            marks = ", ".join("?" * len(chunk))
            params = (flow, *chunk)
            # The events that arrived while a key waited trigger its run too.
            earlier = self._waiting_events(connection, flow, chunk)
            open_requests = {
                row[1]: (row[0], json.loads(row[2]))
                for row in connection.exec_driver_sql(
                    sql(
                        f"SELECT id, partition_key, event_ids FROM {requests_table} "
                        f"WHERE flow = ? AND status = 'pending' AND partition_key IN ({marks})"
                    ),
                    params,
                )
            }
            generations = {
                row[0]: int(row[1])
                for row in connection.exec_driver_sql(
                    sql(
                        f"SELECT partition_key, MAX(generation) FROM {requests_table} "
                        f"WHERE flow = ? AND partition_key IN ({marks}) GROUP BY partition_key"
                    ),
                    params,
                )
            }
            extended, created = [], []
            for key in chunk:
                ids = [*earlier.get(key, ()), *ready[key]]
                if key in open_requests:  # not claimed yet: the new events join it
                    request_id, known = open_requests[key]
                    extended.append((json.dumps(sorted(set(known) | set(ids))), request_id))
                else:
                    created.append((flow, key, generations.get(key, -1) + 1, json.dumps(sorted(set(ids))), now))
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
        waiting_keys = list(waiting)
        for start in range(0, len(waiting_keys), _CHUNK):
            chunk = waiting_keys[start : start + _CHUNK]
            known = self._waiting_events(connection, flow, chunk)
            fresh = [(flow, key, now, json.dumps(sorted(set(waiting[key])))) for key in chunk if key not in known]
            grown = [
                (json.dumps(sorted(set(known[key]) | set(waiting[key]))), flow, key) for key in chunk if key in known
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
            for row in connection.exec_driver_sql(self.store.driver_sql(query), (flow, *keys))
        }

    def record_schedule(self, flow: str, keys: Sequence[str], last_tick: float, now: float) -> None:
        """One request per elapsed schedule key (generation 0: a key is scheduled once)."""
        sql = self.store.driver_sql
        with self.store._failures("record schedule keys"), self.store._write() as connection:  # noqa: SLF001
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

    def requests(
        self,
        flow: str,
        statuses: Sequence[str] = ("pending",),
        limit: int | None = None,
        *,
        due_at: float | None = None,
    ) -> list[TriggerRequest]:
        """Requests in creation order; ``limit`` keeps a pass from reading a long backlog whole.

        With ``due_at``, requests whose failed start backs off past that time are left out.
        """
        query = (
            f"SELECT * FROM {trigger_requests.name} WHERE flow = ? AND status IN ({', '.join('?' * len(statuses))})"
        )
        params: tuple[Any, ...] = (flow, *statuses)
        if due_at is not None:
            query += " AND (not_before IS NULL OR not_before <= ?)"
            params += (due_at,)
        query += " ORDER BY id"
        if limit is not None:
            query += " LIMIT ?"
            params += (limit,)
        with self.store._failures("read trigger requests"), self._engine.connect() as connection:  # noqa: SLF001
            return [_request(row) for row in connection.exec_driver_sql(self.store.driver_sql(query), params)]

    def waiting(self, flow: str) -> list[WaitingKey]:
        query = select(trigger_waiting).where(trigger_waiting.c.flow == flow).order_by(trigger_waiting.c.first_seen)
        with self.store._failures("read waiting keys"), self._engine.connect() as connection:  # noqa: SLF001
            return [
                WaitingKey(row.flow, row.partition_key, row.first_seen, tuple(json.loads(row.event_ids)))
                for row in connection.execute(query)
            ]

    def claim(self, request: TriggerRequest, run_id: str, now: float) -> bool:
        """Take a pending request (or a stale claim) for this daemon; only one claimant wins.

        A first claim fixes the run id of the request's next try and records
        how that run is launched; a takeover of a stale claim keeps both, so
        the same run can never start twice.
        """
        if request.status == "pending":
            condition, params = "status = 'pending'", (now, run_id, request.id)
            assignments = "status = 'claimed', claimed_at = ?, run_id = ?, tries = tries + 1"
        else:
            condition, params = "status = 'claimed' AND claimed_at = ?", (now, request.id, request.claimed_at)
            assignments = "status = 'claimed', claimed_at = ?"
        statement = f"UPDATE {trigger_requests.name} SET {assignments} WHERE id = ? AND {condition}"
        with self.store._failures("claim a trigger request"), self.store._write() as connection:  # noqa: SLF001
            won = connection.exec_driver_sql(self.store.driver_sql(statement), params).rowcount == 1
            if won and request.status == "pending":
                self._launched(connection, request, run_id, request.tries + 1, None, now)
            return bool(won)

    def follow_up(self, request: TriggerRequest, run_id: str, now: float) -> bool:
        """Claim the next try of a request whose run was interrupted; only one claimant wins."""
        statement = (
            f"UPDATE {trigger_requests.name} SET run_id = ?, claimed_at = ?, tries = tries + 1 "
            "WHERE id = ? AND status = 'claimed' AND run_id = ?"
        )
        with self.store._failures("claim a follow-up run"), self.store._write() as connection:  # noqa: SLF001
            won = connection.exec_driver_sql(
                self.store.driver_sql(statement), (run_id, now, request.id, request.run_id)
            ).rowcount == 1
            if won:
                self._launched(connection, request, run_id, request.tries + 1, request.run_id, now)
            return bool(won)

    def _launched(
        self, connection: Any, request: TriggerRequest, run_id: str, attempt: int, follows: str | None, now: float
    ) -> None:
        connection.exec_driver_sql(
            self.store.driver_sql(
                f'INSERT INTO {trigger_runs.name} (run_id, request_id, flow, attempt, follows_run_id, created_at) '
                "VALUES (?, ?, ?, ?, ?, ?)"
            ),
            (run_id, request.id, request.flow, attempt, follows, now),
        )

    def release(self, request: TriggerRequest, error: str, not_before: float) -> bool:
        """Give back a claim whose run could not start: pending again, retried from ``not_before``.

        Only the claimant's own claim is given back (a takeover changed
        ``claimed_at``); the next claim picks a new run id, so a start whose
        commit lands late can never be mistaken for the retry.
        """
        statement = (
            f"UPDATE {trigger_requests.name} SET status = 'pending', run_id = NULL, claimed_at = NULL, "
            "tries = tries - 1, start_failures = start_failures + 1, not_before = ?, last_error = ? "
            "WHERE id = ? AND status = 'claimed' AND run_id = ? AND claimed_at = ?"
        )
        with self.store._failures("release a trigger request"), self.store._write() as connection:  # noqa: SLF001
            released = connection.exec_driver_sql(
                self.store.driver_sql(statement), (not_before, error, request.id, request.run_id, request.claimed_at)
            ).rowcount == 1
            if released:
                connection.exec_driver_sql(
                    self.store.driver_sql(f"DELETE FROM {trigger_runs.name} WHERE run_id = ?"), (request.run_id,)
                )
            return bool(released)

    def finish(self, request_id: int, now: float) -> None:
        statement = (
            f"UPDATE {trigger_requests.name} SET status = 'finished', finished_at = ?, start_failures = 0, "
            "not_before = NULL WHERE id = ?"
        )
        with self.store._failures("finish a trigger request"), self.store._write() as connection:  # noqa: SLF001
            connection.exec_driver_sql(self.store.driver_sql(statement), (now, request_id))

    def abandon(self, request: TriggerRequest, error: str, now: float) -> bool:
        """End a claimed request that will not run: its start was refused for good, or its tries are used up."""
        statement = (
            f"UPDATE {trigger_requests.name} SET status = 'abandoned', finished_at = ?, last_error = ? "
            "WHERE id = ? AND status = 'claimed' AND run_id = ?"
        )
        params = (now, error, request.id, request.run_id)
        with self.store._failures("abandon a trigger request"), self.store._write() as connection:  # noqa: SLF001
            return bool(connection.exec_driver_sql(self.store.driver_sql(statement), params).rowcount == 1)

    def run_status(self, run_id: str) -> str | None:
        """The run's status as history shows it (``interrupted`` once its owner is gone), or None before it started."""
        query = select(
            runs.c.status, runs.c.owner_host, runs.c.owner_pid, runs.c.owner_token, runs.c.heartbeat_at
        ).where(runs.c.run_id == run_id)
        with self.store._failures("read runs"), self._engine.connect() as connection:  # noqa: SLF001
            row = connection.execute(query).first()
        return None if row is None else self.store._status(row)  # noqa: SLF001

    def launch(self, run_id: str) -> TriggerLaunch | None:
        """How a consumer run was launched (None for a run no trigger started)."""
        with self.store._failures("read the run's launch"), self._engine.connect() as connection:  # noqa: SLF001
            row = connection.execute(select(trigger_runs).where(trigger_runs.c.run_id == run_id)).first()
        if row is None:
            return None
        return TriggerLaunch(row.flow, int(row.request_id), int(row.attempt), row.follows_run_id)

    # -- daemons -----------------------------------------------------------------

    def daemon_started(self, daemon_id: str, host: str, pid: int, now: float) -> None:
        with self.store._failures("register the daemon"), self.store._write() as connection:  # noqa: SLF001
            connection.execute(
                insert(daemons).values(daemon_id=daemon_id, host=host, pid=pid, started_at=now, heartbeat_at=now)
            )

    def daemon_heartbeat(self, daemon_id: str, now: float, *, stopped: bool = False) -> None:
        values: dict[str, Any] = {"heartbeat_at": now}
        if stopped:
            values["stopped_at"] = now
        with self.store._failures("record the daemon heartbeat"), self.store._write() as connection:  # noqa: SLF001
            connection.execute(update(daemons).where(daemons.c.daemon_id == daemon_id).values(**values))
