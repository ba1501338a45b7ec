"""Cheap markers of what changed in a store, read often by whoever shows it live (the UI's stream).

Every marker is an indexed lookup whose answer changes when the store does:
the newest event id (the primary key; per asset, the asset-id index), the
newest run start and how many runs started near it (the started-at index),
the running runs with their status as history shows it (the status index:
an owner that died turns ``running`` into ``interrupted`` without a write),
one run's attempt progress (its range of the attempts' primary key), and the
number of one run's newest log line (a seek of the log rows' key). Writers
in any process change them; nothing is kept in memory between reads here.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import NamedTuple

from sqlalchemy import Connection, func, select

from partita.events.model import AssetEvent
from partita.store.rows import event_of
from partita.store.schema import attempt_logs, attempts, events, runs
from partita.store.sql import SqlStore

__all__ = ["ChangeMarkers", "MarkerReader", "RunProgress", "RunsMarker", "newest_event_id", "newest_events"]

#: Runs that started this long before the newest start are counted too: a run's
#: row is written when it starts, so an insert always lands within the window.
_RECENT_RUN_SECONDS = 600.0


class RunsMarker(NamedTuple):
    """What changes when a run starts, changes status or finishes."""

    newest_start: float | None
    recent_starts: int
    #: (run id, status as history shows it, a cancel was requested) of each run stored as running.
    running: frozenset[tuple[str, str, bool]]


class RunProgress(NamedTuple):
    """What changes when one run or its attempts change."""

    status: str
    attempts: int
    finished: int
    invocations: int
    last_start: float | None
    last_finish: float | None

    @property
    def terminal(self) -> bool:
        """Whether the run's end is stored: its attempts can no longer change (``interrupted`` is only derived)."""
        return self.status in ("success", "failed", "cancelled")


class MarkerReader:
    """The markers, read over one connection (one snapshot on both backends)."""

    def __init__(self, store: SqlStore, connection: Connection) -> None:
        self._connection = connection
        self._status = store.run_history.status
        self._sql = store.database.driver_sql

    def newest_event_id(self) -> int:
        return int(self._connection.execute(select(func.max(events.c.id))).scalar() or 0)

    def newest_event_ids(self, assets: Sequence[str]) -> dict[str, int]:
        """Each asset's newest event id (0: none yet), one index seek each."""
        query = self._sql(f"SELECT MAX(id) FROM {events.name} WHERE asset = ?")
        return {asset: int(self._connection.exec_driver_sql(query, (asset,)).scalar() or 0) for asset in assets}

    def runs(self) -> RunsMarker:
        c = runs.c
        newest = self._connection.execute(select(func.max(c.started_at))).scalar()
        recent = 0
        if newest is not None:
            window = select(func.count()).where(c.started_at >= newest - _RECENT_RUN_SECONDS)
            recent = int(self._connection.execute(window.select_from(runs)).scalar() or 0)
        query = select(
            c.run_id, c.status, c.owner_host, c.owner_pid, c.owner_token, c.heartbeat_at, c.cancel_requested_at
        ).where(c.status == "running")
        running = frozenset(
            (row.run_id, self._status(row), row.cancel_requested_at is not None)
            for row in self._connection.execute(query)
        )
        return RunsMarker(newest, recent, running)

    def run_progress(self, run_id: str) -> RunProgress | None:
        """The run's status and its attempts' progress; None for a run not (yet) in the store."""
        c = runs.c
        row = self._connection.execute(
            select(c.status, c.owner_host, c.owner_pid, c.owner_token, c.heartbeat_at).where(c.run_id == run_id)
        ).first()
        if row is None:
            return None
        a = attempts.c
        counted = self._connection.execute(
            select(
                func.count(),
                func.count(a.finished_at),
                func.sum(a.invocations),
                func.max(a.started_at),
                func.max(a.finished_at),
            ).where(a.run_id == run_id)
        ).one()
        return RunProgress(
            self._status(row), int(counted[0]), int(counted[1]), int(counted[2] or 0), counted[3], counted[4]
        )

    def newest_run_log_id(self, run_id: str) -> int:
        """The number of the run's newest log line (0: none yet), one seek of the log rows' key (run, number).

        The run's one journal numbers its lines in write order, so a larger
        number is a newer line.
        """
        logs = attempt_logs.c
        query = select(func.max(logs.id)).where(logs.run_id == run_id)
        return int(self._connection.execute(query).scalar() or 0)


class ChangeMarkers:
    """Opens a `MarkerReader` per read of a store's markers."""

    def __init__(self, store: SqlStore) -> None:
        self._store = store

    @contextmanager
    def reading(self) -> Iterator[MarkerReader]:
        database = self._store.database
        with database.failures("read what changed"), database.connect() as connection:
            yield MarkerReader(self._store, connection)


def newest_event_id(store: SqlStore, asset: str | None = None) -> int:
    """The newest event id (of ``asset`` when given; 0: none yet): what a page was drawn with, for its stream."""
    with ChangeMarkers(store).reading() as markers:
        return markers.newest_event_ids([asset])[asset] if asset is not None else markers.newest_event_id()


def newest_events(
    store: SqlStore,
    *,
    asset: str | None = None,
    partition_key: str | None = None,
    before: int | None = None,
    limit: int,
) -> list[AssetEvent]:
    """Events newest first, at most ``limit``, with ids below ``before`` when given (a page of a feed).

    ``partition_key`` narrows an asset's events (the asset-key index); the
    caller gives it with ``asset``, since a key alone has no index to use.
    """
    c = events.c
    query = select(events).order_by(c.id.desc()).limit(limit)
    if asset is not None:
        query = query.where(c.asset == asset)
    if partition_key is not None:
        query = query.where(c.partition_key == partition_key)
    if before is not None:
        query = query.where(c.id < before)
    database = store.database
    with database.failures("list events"), database.connect() as connection:
        return [event_of(row) for row in connection.execute(query)]
