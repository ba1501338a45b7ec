"""Write transactions on the calling thread's own SQLite connection, without SQLAlchemy.

A small write through a SQLAlchemy `Connection` cost about 45 µs more than
the same transaction on the driver (pool checkout and return, the begin and
commit events, a result object per statement): most of a triggered run's
own start or end. The verbs on that path (a run's start, progress and end;
claiming trigger requests) write through here on a SQLite file opened for
writing. Each thread keeps one connection, configured like the engine's
(`configure_sqlite`); a forked child opens its own. Driver errors propagate
unwrapped, as from `Database.write`'s raw statements: the callers' failure
translation and transient retries already know them.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from typing import Any

from partita.store.fork_gate import SQLITE_WRITE_GATE

__all__ = ["DriverTransaction", "SqliteWriters", "ThreadConnections"]


class ThreadConnections:
    """One DBAPI connection per thread, opened on first use (a forked child opens its own), all closed at once."""

    def __init__(self, connect: Callable[[], Any]) -> None:
        self._connect = connect
        self._local = threading.local()
        self._lock = threading.Lock()
        self._open: list[Any] = []

    def get(self) -> Any:
        """The calling thread's connection."""
        local = self._local
        if getattr(local, "pid", None) != os.getpid():  # first use on this thread, a forked child, or dropped
            local.connection = self._connect()
            local.pid = os.getpid()
            with self._lock:
                self._open.append(local.connection)
        return local.connection

    def drop(self) -> None:
        """Close the calling thread's connection (after a driver error): its next use reconnects."""
        local = self._local
        connection, local.connection, local.pid = getattr(local, "connection", None), None, None
        if connection is not None:
            with self._lock:  # closed here: `close` need not keep it (a daemon may drop many over its life)
                if connection in self._open:
                    self._open.remove(connection)
            with contextlib.suppress(Exception):
                connection.close()

    def close(self) -> None:
        """Close every thread's connection (the store is closing)."""
        with self._lock:
            connections, self._open = self._open, []
        self._local = threading.local()
        for connection in connections:
            with contextlib.suppress(Exception):
                connection.close()


class DriverTransaction:
    """What a write transaction's body uses of a connection: driver SQL (``?``) and ``info``.

    ``exec_driver_sql`` returns the DBAPI cursor: iterate it, ``fetchone``,
    ``fetchall`` or read ``rowcount``; a list of tuples runs ``executemany``.
    """

    __slots__ = ("_connection", "info")

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection
        self.info: dict[str, Any] = {}

    def exec_driver_sql(self, statement: str, parameters: Any = ()) -> sqlite3.Cursor:
        if isinstance(parameters, list):
            return self._connection.executemany(statement, parameters)
        return self._connection.execute(statement, parameters)


class SqliteWriters:
    """Each thread's own connection to one SQLite file: its write transactions, and reads outside them."""

    def __init__(self, connect: Callable[[], sqlite3.Connection], committed: Callable[[], None]) -> None:
        self._connections = ThreadConnections(connect)
        self._committed = committed  # told after every commit (the background checkpoint)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[DriverTransaction]:
        """``BEGIN IMMEDIATE`` … ``COMMIT`` under the fork gate; rolled back when the body raises."""
        connection: sqlite3.Connection = self._connections.get()
        transaction = DriverTransaction(connection)
        with SQLITE_WRITE_GATE:
            connection.execute("BEGIN IMMEDIATE")
            try:
                yield transaction
                connection.execute("COMMIT")
            except BaseException:
                if connection.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        connection.execute("ROLLBACK")
                raise
        self._committed()

    def rows(self, statement: str, parameters: Any = ()) -> list[Any]:
        """Every row of a read on this thread's connection, outside any transaction (WAL: the newest commit)."""
        return self._connections.get().execute(statement, parameters).fetchall()

    def close(self) -> None:
        """Close every thread's connection (the store is closing)."""
        self._connections.close()
