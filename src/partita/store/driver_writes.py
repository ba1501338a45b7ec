"""Write transactions on the process's shared SQLite connection, without SQLAlchemy.

A small write through a SQLAlchemy `Connection` cost about 45 µs more than
the same transaction on the driver (pool checkout and return, the begin and
commit events, a result object per statement): most of a triggered run's
own start or end. The verbs on that path (a run's start, progress and end;
claiming trigger requests) and emission write through here on a SQLite file
opened for writing.

They share one connection per process (`SharedConnection`), configured
like the engine's (`configure_sqlite`) and used only under the write gate,
which serializes them anyway. SQLite keeps a connection's page cache only
while no other connection commits: two connections taking turns re-read
every page they touch, about 20 µs more per small transaction (60 µs for
four). A forked child opens its own. Driver errors propagate unwrapped, as
from `Database.write`'s raw statements: the callers' failure translation and
transient retries already know them.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from partita.store.fork_gate import SQLITE_CALL_GATE, SQLITE_READS, SQLITE_WRITE_GATE, forget_in_child

__all__ = [
    "DriverTransaction", "SharedConnection", "SqliteWriters", "ThreadConnections", "close_quietly", "roll_back_or_drop",
]  # fmt: skip


def close_quietly(cursor: Any) -> None:
    """Close ``cursor`` (None: nothing) whatever its connection's state: it is being given up."""
    if cursor is not None:
        with contextlib.suppress(Exception):
            cursor.close()


def roll_back_or_drop(connection: sqlite3.Connection, drop: Callable[[], None]) -> None:
    """End the transaction left open on ``connection``: roll it back, or ``drop`` the connection if even that fails.

    Closing a connection ends its transaction once no statement of it is
    left: ``drop`` closes the cursors it knows of first. Left open, the
    transaction would keep SQLite's write lock from every other connection,
    and the next statement on the connection would silently join it.
    """
    if connection.in_transaction:
        try:
            connection.execute("ROLLBACK")
        except sqlite3.Error:
            drop()


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
            with SQLITE_CALL_GATE, contextlib.suppress(Exception):
                connection.close()

    def close(self) -> None:
        """Close every thread's connection (the store is closing)."""
        with self._lock:
            connections, self._open = self._open, []
        self._local = threading.local()
        for connection in connections:
            with SQLITE_CALL_GATE, contextlib.suppress(Exception):  # a fork must not catch SQLite closing a file
                connection.close()


class SharedConnection:
    """The process's one write connection to a SQLite file: use it only while holding `SQLITE_WRITE_GATE`.

    Opened on first use and again after `drop`; a forked child leaves the
    parent's alone (closing it there could checkpoint and delete the log)
    and opens its own.
    """

    def __init__(self, connect: Callable[[], sqlite3.Connection]) -> None:
        #: Opens the connection (again after `drop`).
        self.connect = connect
        self._connection: sqlite3.Connection | None = None
        forget_in_child(self)

    def get(self) -> sqlite3.Connection:
        """The connection (the caller holds the write gate)."""
        connection = self._connection
        if connection is None:
            connection = self._connection = self.connect()
        return connection

    def drop(self) -> None:
        """Close it after a driver error: the next use reconnects."""
        with SQLITE_WRITE_GATE:
            connection, self._connection = self._connection, None
            if connection is not None:
                with contextlib.suppress(Exception):
                    connection.close()

    close = drop

    def _forget_after_fork(self) -> None:
        self._connection = None


class DriverTransaction:
    """What a write transaction's body uses of a connection: driver SQL (``?``) and ``info``.

    ``exec_driver_sql`` returns the DBAPI cursor: iterate it, ``fetchone``,
    ``fetchall`` or read ``rowcount``; a list of tuples runs ``executemany``.
    """

    __slots__ = ("_connection", "_cursors", "info")

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection
        self._cursors: list[weakref.ref[sqlite3.Cursor]] = []  # weak: a read left unfinished is not kept open
        self.info: dict[str, Any] = {}

    def exec_driver_sql(self, statement: str, parameters: Any = ()) -> sqlite3.Cursor:
        if isinstance(parameters, list):
            cursor = self._connection.executemany(statement, parameters)
        else:
            cursor = self._connection.execute(statement, parameters)
        self._cursors.append(weakref.ref(cursor))
        return cursor

    def close_cursors(self) -> None:
        """Close every cursor it returned: a connection closed while one holds a statement keeps its transaction.

        (SQLite closes such a connection only once its last statement is
        finalized, and a traceback can keep a cursor alive a long time.)
        """
        for ref in self._cursors:
            close_quietly(ref())


class SqliteWriters:
    """Write transactions on the process's shared connection to one SQLite file, and reads."""

    def __init__(
        self,
        shared: SharedConnection,
        committed: Callable[[], None],
        connect_reader: Callable[[], Any],
        host_lock: contextlib.AbstractContextManager[Any],
    ) -> None:
        self._shared = shared
        self._committed = committed  # told after every commit (the background checkpoint)
        self._host_lock = host_lock  # the other processes' writers wait (`host_lock`), or nothing
        self._readers = ThreadConnections(connect_reader)  # for reads while another thread writes

    @contextlib.contextmanager
    def transaction(self) -> Iterator[DriverTransaction]:
        """``BEGIN IMMEDIATE`` … ``COMMIT`` under the write gate; rolled back when the body raises."""
        with SQLITE_WRITE_GATE, self._host_lock:
            connection = self._shared.get()
            transaction = DriverTransaction(connection)
            connection.execute("BEGIN IMMEDIATE")
            try:
                yield transaction
                connection.execute("COMMIT")
            except BaseException:
                roll_back_or_drop(connection, lambda: self._drop(transaction))
                raise
        self._committed()

    def _drop(self, transaction: DriverTransaction) -> None:
        """Close the shared connection whose transaction could not be rolled back; its next use reconnects."""
        transaction.close_cursors()
        self._shared.drop()

    def statement(self, statement: str, parameters: Any = ()) -> None:
        """One statement that commits on its own (autocommit) under the write gate: one call into SQLite.

        Never inside a transaction (this thread's own, under the reentrant
        gate): it would join it and commit nothing yet.
        """
        with SQLITE_WRITE_GATE, self._host_lock:
            connection = self._shared.get()
            if connection.in_transaction:
                raise sqlite3.OperationalError("a statement that commits on its own was run inside a transaction")
            connection.execute(statement, parameters)
        self._committed()

    def rows(self, statement: str, parameters: Any = ()) -> list[Any]:
        """Every row of a read outside any transaction (WAL: the newest commit).

        On the shared connection, whose page cache is warm, when no other
        thread writes (inside this thread's own transaction, it sees that
        transaction's writes); else on the thread's own reading connection,
        rather than waiting for the writer.
        """
        if SQLITE_WRITE_GATE.acquire(blocking=False):
            try:
                return self._shared.get().execute(statement, parameters).fetchall()
            finally:
                SQLITE_WRITE_GATE.release()
        with SQLITE_READS.reading():
            return self._readers.get().execute(statement, parameters).fetchall()

    def close(self) -> None:
        """Close the reading connections (the shared one is its owner's to close)."""
        self._readers.close()
