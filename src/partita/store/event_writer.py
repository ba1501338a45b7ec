"""`EventWriter`: emission's per-thread DBAPI connections and its prepared statements.

Emission commits one event per call; skipping pool checkout and statement
construction keeps it close to the driver's own speed. The connections live
outside the engine's pool, so they are kept, dropped and closed here.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from typing import Any

from partita.store.database import Database
from partita.store.fork_gate import sqlite_write
from partita.store.schema import events

__all__ = ["EventWriter"]


class EventWriter:
    """Inserts one event per transaction over a DBAPI connection of the calling thread's own."""

    def __init__(self, database: Database) -> None:
        self._database = database
        self._sqlite = database.dialect == "sqlite"
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[Any] = []
        columns = [column.name for column in list(events.columns)[1:]]
        self._insert_sql = database.driver_sql(
            f"INSERT INTO {events.name} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))}) "
            "ON CONFLICT (dedupe_key) WHERE dedupe_key IS NOT NULL DO NOTHING RETURNING id"
        )
        self._lookup_sql = database.driver_sql(
            f"SELECT id, timestamp, payload_hash FROM {events.name} WHERE dedupe_key = ?"
        )

    def _connection(self) -> Any:
        """This thread's connection, opened on its first event."""
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._database.driver_connection()
            self._local.connection = connection
            with self._lock:
                self._connections.append(connection)
        return connection

    def drop(self) -> None:
        """Close this thread's connection after a driver error: the next event reconnects."""
        connection = getattr(self._local, "connection", None)
        self._local.connection = None
        if connection is not None:
            with contextlib.suppress(Exception):
                connection.close()

    def insert(self, row: tuple[Any, ...], dedupe_key: str | None) -> tuple[Any, Any]:
        """Insert ``row`` (an events row without its id) and commit.

        Returns (the new id, None), or (None, (id, timestamp, payload hash) of
        the stored event with the same dedupe key) when the key was taken.
        Driver errors propagate unwrapped.
        """
        connection = self._connection()
        if self._sqlite:
            cursor = connection.cursor()
            try:
                with sqlite_write():
                    cursor.execute("BEGIN IMMEDIATE")
                    try:
                        found = cursor.execute(self._insert_sql, row).fetchone()
                        existing = (
                            None if found is not None else cursor.execute(self._lookup_sql, (dedupe_key,)).fetchone()
                        )
                        cursor.execute("COMMIT")
                    except BaseException:
                        with contextlib.suppress(sqlite3.Error):
                            cursor.execute("ROLLBACK")
                        raise
            finally:
                cursor.close()
            if found is not None:
                self._database.events_committed((row[0],))
        else:
            try:
                with connection.cursor() as cursor:
                    found = cursor.execute(self._insert_sql, row).fetchone()
                    existing = None if found is not None else cursor.execute(self._lookup_sql, (dedupe_key,)).fetchone()
                connection.commit()
            except BaseException:
                with contextlib.suppress(Exception):
                    connection.rollback()
                raise
        return (None if found is None else found[0]), existing

    def close(self) -> None:
        """Close every thread's connection."""
        with self._lock:
            connections, self._connections = self._connections, []
        for connection in connections:
            with contextlib.suppress(Exception):
                connection.close()
