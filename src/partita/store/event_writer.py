"""`EventWriter`: emission's DBAPI connections, its prepared statements and its transactions.

Emission commits before every receipt returns; skipping pool checkout and
statement construction keeps it close to the driver's own speed. One
transaction carries one event, or several when threads emit at once
(`GroupCommit` gathers them). On a SQLite file that transaction is a single
INSERT statement, however many events it carries (a refused row, and a few
other cases, take an explicit transaction of a statement per row), on the
process's shared write connection (`driver_writes.SharedConnection`);
elsewhere each thread has its own connection, outside the engine's pool,
kept, dropped and closed here.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Sequence
from typing import Any

from partita.store.database import Database
from partita.store.driver_writes import ThreadConnections, close_quietly, roll_back_or_drop
from partita.store.fork_gate import SQLITE_WRITE_GATE
from partita.store.schema import events

__all__ = ["EventWriter"]

#: Driver errors about one row's values, not the store: the other rows of its transaction are written again.
_ROW_ERRORS: tuple[type[BaseException], ...] = (
    sqlite3.IntegrityError,
    sqlite3.DataError,
    sqlite3.ProgrammingError,
    sqlite3.InterfaceError,
)


def _row_errors(dialect: str) -> tuple[type[BaseException], ...]:
    if dialect == "sqlite":
        return _ROW_ERRORS
    import psycopg

    # Not ProgrammingError: on PostgreSQL it also means a missing table or a refused privilege.
    return (psycopg.IntegrityError, psycopg.DataError)


def _insert_rows_sql(count: int) -> str:
    """An INSERT of ``count`` events rows without their id (``?`` placeholders); a taken dedupe key inserts nothing."""
    columns = [column.name for column in list(events.columns)[1:]]
    row = f"({', '.join('?' * len(columns))})"
    return (
        f"INSERT INTO {events.name} ({', '.join(columns)}) VALUES {', '.join([row] * count)} "
        "ON CONFLICT (dedupe_key) WHERE dedupe_key IS NOT NULL DO NOTHING"
    )


class EventWriter:
    """Inserts events over a DBAPI connection (SQLite: the shared one; else the thread's own), a transaction per `commit`.

    An item is (an events row without its id, its dedupe key). Its outcome is
    (the new id, None); or (None, (id, timestamp, payload hash)) of the
    stored event that already has its dedupe key; or the driver error that
    kept it from being written.
    """

    def __init__(self, database: Database) -> None:
        self._database = database
        self._sqlite = database.dialect == "sqlite"
        self._checkpointer = database.checkpointer
        self._driver_errors = database.driver_errors
        self._row_errors = _row_errors(database.dialect)
        self._shared = database.shared_writer  # None: a connection per thread
        self._connections = ThreadConnections(database.driver_connection)
        self._local = threading.local()  # the thread's cursor, kept with its connection
        self._shared_cursor: tuple[Any, Any] = (None, None)  # (the shared connection, a cursor of it)
        # SQLite reports the new id as the cursor's lastrowid (``id`` is the rowid): RETURNING
        # would cost a tenth of the whole insert. PostgreSQL has no such thing.
        self._insert_sql = database.driver_sql(_insert_rows_sql(1) + ("" if self._sqlite else " RETURNING id"))
        self._lookup_sql = database.driver_sql(
            f"SELECT id, timestamp, payload_hash FROM {events.name} WHERE dedupe_key = ?"
        )
        self._many_sql: dict[int, str] = {}  # rows -> a SQLite INSERT of that many rows, returning their ids

    def _connection(self) -> Any:
        """This thread's connection, opened on its first event (with a cursor kept beside it on SQLite)."""
        connection = self._connections.get()
        if getattr(self._local, "connection", None) is not connection:
            self._local.connection = connection
            self._local.cursor = connection.cursor() if self._sqlite else None
        return connection

    def _sqlite_cursor(self) -> Any:
        """A cursor of the connection SQLite events go through (the caller holds the write gate)."""
        if self._shared is None:  # in memory: the engine's one connection
            self._connection()
            return self._local.cursor
        connection = self._shared.get()
        kept, cursor = self._shared_cursor
        if kept is not connection:  # kept with its connection: one less object per event
            cursor = connection.cursor()
            self._shared_cursor = (connection, cursor)
        return cursor

    def drop(self) -> None:
        """Close the connection after a driver error or a failed rollback: the next event reconnects.

        Its kept cursor is closed first: SQLite closes a connection, and ends
        its transaction, only once no statement of it is left.
        """
        if self._sqlite and self._shared is not None:
            with SQLITE_WRITE_GATE:  # the kept cursor is the shared connection's: used only under the gate
                _, cursor = self._shared_cursor
                self._shared_cursor = (None, None)
                close_quietly(cursor)
                self._shared.drop()
            return
        close_quietly(getattr(self._local, "cursor", None))
        self._local.connection = self._local.cursor = None
        self._connections.drop()

    def commit(self, items: list[tuple[tuple[Any, ...], str | None]]) -> list[Any]:
        """Write ``items`` in one transaction; one outcome per item, in order.

        A row the database refuses (a constraint, a value the driver cannot
        send) fails alone: the transaction is rolled back and the other rows
        are written again without it. Any other driver error (a lost
        connection, a disk error, the write lock never coming free) is every
        item's outcome: nothing was written. Anything else propagates, with
        nothing written.
        """
        if self._sqlite:
            outcomes = self._in_one_statement(items)
            if outcomes is not None:
                return outcomes
        outcomes = [None] * len(items)
        pending: Any = range(len(items))
        while pending:
            failed, error = self._transaction(items, pending, outcomes)
            if error is None:
                break
            if failed is None or not isinstance(error, self._row_errors):
                self.drop()  # the next transaction reconnects
                for index in pending:
                    outcomes[index] = error
                break
            outcomes[failed] = error
            pending = [index for index in pending if index != failed]
        return outcomes

    def commit_one(self, item: tuple[tuple[Any, ...], str | None]) -> Any:
        """`commit` of one item: its outcome."""
        return self.commit([item])[0]

    def _transaction(self, items: list[Any], pending: Sequence[int], outcomes: list[Any]) -> tuple[int | None, Any]:
        """Insert the ``pending`` items and commit, filling their ``outcomes``.

        Returns (None, None) once committed, else (the index of the item whose
        statement failed, or None, the driver error) with everything rolled back.
        """
        running: list[int | None] = [None]  # the item whose statements run; None outside them
        inserted: list[str] = []  # assets of new events, for the wake-up
        try:
            if self._sqlite:
                with SQLITE_WRITE_GATE, self._database.host_lock:
                    cursor = self._sqlite_cursor()
                    try:
                        cursor.execute("BEGIN IMMEDIATE")
                        self._insert_sqlite(cursor, items, pending, outcomes, inserted, running)
                        cursor.execute("COMMIT")
                    except BaseException:
                        roll_back_or_drop(cursor.connection, self.drop)
                        raise
            else:
                connection = self._connection()
                try:
                    with connection.cursor() as cursor:
                        self._insert_returning(cursor, items, pending, outcomes, running)
                    connection.commit()
                except BaseException:
                    with contextlib.suppress(Exception):
                        connection.rollback()
                    raise
        except self._driver_errors as exc:
            return running[0], exc
        if self._sqlite:
            self._committed(inserted)
        return None, None

    def _committed(self, inserted: list[str]) -> None:
        """After a SQLite commit: a checkpoint soon, and the daemons following ``inserted`` assets woken."""
        if self._checkpointer is not None:
            self._checkpointer.committed()
        self._database.events_committed(inserted)

    def _in_one_statement(self, items: list[tuple[tuple[Any, ...], str | None]]) -> list[Any] | None:
        """SQLite file: write ``items`` with one INSERT that is its own transaction; their outcomes.

        One statement instead of BEGIN, an INSERT per row and COMMIT: each
        is a call that releases the interpreter's lock and must take it back
        while other emitting threads hold it. None where `commit` must write
        them in a transaction, a statement each: a row the database refuses
        (that transaction finds it), several items without a dedupe key (the
        RETURNING rows name each new event by its key), an in-memory store
        or a transaction already open on the connection (an INSERT would
        silently join it; BEGIN refuses it, as it always did).
        """
        count = len(items)
        if self._shared is None or (count > 1 and sum(dedupe_key is None for _, dedupe_key in items) > 1):
            return None
        with SQLITE_WRITE_GATE, self._database.host_lock:
            cursor = None
            try:
                cursor = self._sqlite_cursor()
                if cursor.connection.in_transaction:
                    return None
                if count == 1:
                    row, dedupe_key = items[0]
                    cursor.execute(self._insert_sql, row)
                    new_ids = {dedupe_key: cursor.lastrowid} if cursor.rowcount == 1 else {}
                else:
                    values = [value for row, _ in items for value in row]
                    new_ids = dict(cursor.execute(self._insert_many_sql(count), values).fetchall())
            except BaseException as exc:
                if cursor is not None:
                    self._abandon(cursor, returning=count > 1)
                if isinstance(exc, self._row_errors):
                    return None
                if not isinstance(exc, self._driver_errors):
                    raise
                self.drop()  # the next transaction reconnects
                return [exc] * count
            outcomes, inserted = self._new_or_stored(cursor, items, new_ids)
        self._committed(inserted)
        return outcomes

    def _abandon(self, cursor: Any, *, returning: bool) -> None:
        """After a statement was interrupted or failed: nothing of it stays written, and no transaction stays open.

        A RETURNING statement makes its changes at its first step and
        commits them only when it ends: one still running is stopped and
        drained, which rolls it back (letting it end, or closing its cursor,
        would commit it). A failed statement has ended already, so stopping
        it changes nothing. A connection that cannot even roll back is
        dropped: closing it ends the transaction.
        """
        connection = cursor.connection
        if returning:
            with contextlib.suppress(sqlite3.Error):
                connection.interrupt()
                cursor.fetchall()
        roll_back_or_drop(connection, self.drop)

    def _new_or_stored(
        self, cursor: Any, items: list[tuple[tuple[Any, ...], str | None]], new_ids: dict[str | None, int]
    ) -> tuple[list[Any], list[str]]:
        """Each item's outcome once its INSERT committed, and the assets of the new events.

        An item whose dedupe key was already taken (earlier, or by an item
        before it in the same statement) gets the stored event, read after
        the commit: events are never deleted, so that read needs no
        transaction with the INSERT. A store failure during the read fails
        only the items it was for (their events were written before), and
        the next transaction reconnects.
        """
        outcomes: list[Any] = []
        inserted: list[str] = []
        failed = False
        for row, dedupe_key in items:
            new_id = new_ids.pop(dedupe_key, None)
            if new_id is not None:
                outcomes.append((new_id, None))
                inserted.append(row[0])
                continue
            try:  # fetchall: the read ends here, holding no snapshot open on the write connection
                stored = cursor.execute(self._lookup_sql, (dedupe_key,)).fetchall()
            except self._driver_errors as exc:
                outcomes.append(exc)
                failed = True
                continue
            outcomes.append((None, stored[0] if stored else None))
        if failed:
            self.drop()
        return outcomes, inserted

    def _insert_many_sql(self, count: int) -> str:
        """An INSERT of ``count`` rows returning the (dedupe key, id) of each new one."""
        sql = self._many_sql.get(count)
        if sql is None:
            sql = self._many_sql[count] = _insert_rows_sql(count) + " RETURNING dedupe_key, id"
        return sql

    def _insert_sqlite(
        self,
        cursor: Any,
        items: list[Any],
        pending: Sequence[int],
        outcomes: list[Any],
        inserted: list[str],
        running: list[int | None],
    ) -> None:
        """Each pending item's statements, noting its outcome; ``running`` names the item at work."""
        insert_sql, lookup_sql = self._insert_sql, self._lookup_sql
        for index in pending:
            running[0] = index
            row, dedupe_key = items[index]
            cursor.execute(insert_sql, row)
            if cursor.rowcount == 1:
                outcomes[index] = (cursor.lastrowid, None)
                inserted.append(row[0])
            else:  # the dedupe key is taken: the stored event's receipt
                outcomes[index] = (None, cursor.execute(lookup_sql, (dedupe_key,)).fetchone())
        running[0] = None

    def _insert_returning(
        self, cursor: Any, items: list[Any], pending: Sequence[int], outcomes: list[Any], running: list[int | None]
    ) -> None:
        """`_insert_sqlite` for PostgreSQL, where the insert returns the new id (waking is the database's job)."""
        insert_sql, lookup_sql = self._insert_sql, self._lookup_sql
        for index in pending:
            running[0] = index
            row, dedupe_key = items[index]
            found = cursor.execute(insert_sql, row).fetchone()
            outcomes[index] = (
                (found[0], None) if found is not None else (None, cursor.execute(lookup_sql, (dedupe_key,)).fetchone())
            )
        running[0] = None

    def close(self) -> None:
        """Close every thread's connection."""
        self._connections.close()
