"""`Database`: the SQL database behind a store URL, shared by every store of one `SqlStore`.

Engine set-up (SQLite file, memory or read-only; PostgreSQL), write
transactions, error translation and the bulk-write helpers live here once, so
the run history, the event log, the partition registry and the trigger state
each speak SQL about their own tables and nothing else.

SQLite runs in WAL mode with a busy timeout: readers (``partita runs list``)
never block a writing flow, and two flows writing one file wait for each
other instead of failing. Writers take the write lock up front (``BEGIN
IMMEDIATE``) so a transaction never has to upgrade its lock midway.
"""

from __future__ import annotations

import contextlib
import functools
import select
import sqlite3
from collections.abc import Collection, Iterable, Iterator
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL
from sqlalchemy.exc import DisconnectionError, SQLAlchemyError
from sqlalchemy.pool import StaticPool

from partita.errors import ConfigurationError, StoreError
from partita.store.bulk_writes import RowShape, Upsert, insert_rows, upsert_rows, upsert_statements
from partita.store.checkpointer import LOG_FILE_LIMIT, WRITER_CHECKPOINT_PAGES, WalCheckpointer, background_checkpoints
from partita.store.driver_writes import SharedConnection, SqliteWriters
from partita.store.fork_gate import SQLITE_CALL_GATE, SQLITE_READS, sqlite_write
from partita.store.host_lock import HostWriteLock
from partita.store.liveness import current_host
from partita.store.local_wakeup import WakeupSender, local_wakeup_supported
from partita.store.location import (
    SqliteAccess,
    StoreBackend,
    StoreLocation,
    parse_store_url,
    sqlite_access,
    sqlite_connector,
)
from partita.store.schema import events
from partita.store.sqlite_verbs import SUPPORTED as ONE_STATEMENT_VERBS
from partita.store.sqlite_verbs import install as install_verbs

__all__ = ["Database", "configure_sqlite", "describe_failure"]

_BUSY_TIMEOUT_MS = 30_000
#: ``connection.info`` key: the assets whose events the open write transaction inserted.
_EVENTS_WRITTEN = "partita_events_written"
#: Pool record ``info`` key: its checkout counts as a read a fork waits for (`fork_gate.SQLITE_READS`).
_COUNTED_READ = "partita_counted_read"


_NO_HOST_LOCK: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()


def _nothing() -> None:
    """A commit's follow-up where no background checkpoint runs."""


def configure_sqlite(connection: Any) -> None:
    """WAL with a busy timeout: readers never block a writer, writers wait for each other.

    ``synchronous=NORMAL`` in WAL mode: a committed transaction survives a
    crash of the process; the last transactions may be lost on power loss.
    Checkpoints run in the background (`WalCheckpointer`) where SQLite has
    the WAL-reset fix; a writer's own starts only at `WRITER_CHECKPOINT_PAGES`
    and restarts the log, and a restarting log file is cut back to
    `LOG_FILE_LIMIT` bytes.
    """
    connection.isolation_level = None  # partita issues BEGIN itself
    cursor = connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
    with contextlib.suppress(sqlite3.OperationalError):  # read-only files keep their mode
        cursor.execute("PRAGMA journal_mode = WAL")
    cursor.execute("PRAGMA synchronous = NORMAL")
    cursor.execute(f"PRAGMA wal_autocheckpoint = {WRITER_CHECKPOINT_PAGES}")
    cursor.execute(f"PRAGMA journal_size_limit = {LOG_FILE_LIMIT}")
    cursor.execute("PRAGMA foreign_keys = ON")
    cursor.close()


def describe_failure(exc: BaseException) -> str:
    """The first line of a driver error, or what it means for the store when partita knows."""
    original = getattr(exc, "orig", None) or exc
    text = str(original).strip().splitlines()[0] if str(original).strip() else type(original).__name__
    if "file is not a database" in text or "malformed" in text:
        return "the file is not a SQLite database or is corrupt; nothing was written to it"
    if "readonly" in text or "read-only" in text:
        return "the store is read-only; nothing can be written to it"
    return text


def _sqlite_engine(location: StoreLocation, access: SqliteAccess) -> Engine:
    if location.path is None:
        engine = create_engine("sqlite://", poolclass=StaticPool, connect_args={"check_same_thread": False})
    else:
        timeout = _BUSY_TIMEOUT_MS / 1000
        connector = sqlite_connector(location.path, access, timeout)
        file_url = location.url.set(drivername="sqlite", query={})
        if connector is None:
            engine = create_engine(file_url, connect_args={"timeout": timeout, "check_same_thread": False})

            @event.listens_for(engine, "do_connect")
            def _open(dialect: Any, _: Any, cargs: Any, cparams: Any) -> Any:
                return _opened_under_the_gate(dialect.connect, *cargs, **cparams)

        else:
            engine = create_engine(file_url, creator=functools.partial(_opened_under_the_gate, connector))

        @event.listens_for(engine, "checkout")
        def _reading(_: Any, record: Any, __: Any) -> None:
            # A pooled connection counts as a read until it is back: a fork waits (`fork_gate`).
            record.info[_COUNTED_READ] = SQLITE_READS.enter()

        @event.listens_for(engine, "checkin")
        def _read(_: Any, record: Any) -> None:
            if record.info.pop(_COUNTED_READ, False):
                SQLITE_READS.leave()

    @event.listens_for(engine, "connect")
    def _configure(dbapi_connection: Any, _: Any) -> None:
        with SQLITE_CALL_GATE:  # its statements run SQLite outside the interpreter's lock (`fork_gate`)
            configure_sqlite(dbapi_connection)

    @event.listens_for(engine, "begin")
    def _begin(connection: Connection) -> None:
        writing = connection.get_execution_options().get("partita_write", False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if writing else "BEGIN")

    return engine


def _opened_under_the_gate(connect: Any, *args: Any, **kwargs: Any) -> Any:
    """``connect(*args, **kwargs)`` holding the call gate: a fork must not catch SQLite opening a file (`fork_gate`)."""
    with SQLITE_CALL_GATE:
        return connect(*args, **kwargs)


def _postgresql_engine(url: URL) -> Engine:
    try:
        import psycopg  # noqa: F401
    except ImportError:
        raise ConfigurationError(
            "a postgresql:// store needs psycopg; install it with: pip install 'partita[postgres]'"
        ) from None
    engine = create_engine(
        url.set(drivername="postgresql+psycopg"),
        pool_size=2,
        connect_args={"connect_timeout": 10},
    )

    @event.listens_for(engine, "checkout")
    def _closed_by_the_server(dbapi_connection: Any, _: Any, __: Any) -> None:
        """A pooled connection the server closed (a restart, a terminated backend) is replaced.

        An idle connection receives nothing unless the server ended it: a
        socket with something to read, checked without waiting, replaces a
        ping round trip per checkout (a trigger pass checks out several).
        """
        if dbapi_connection.closed or select.select([dbapi_connection.fileno()], [], [], 0)[0]:
            raise DisconnectionError("the server closed this pooled connection")

    return engine


class Database:
    """The database a store URL names: its engine, write transactions and SQL helpers.

    ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db``,
    ``sqlite://`` (in memory, this process only) or
    ``postgresql://user:password@host:port/database``. Opening it neither
    checks nor upgrades the schema (`partita.store.upgrade` does).
    """

    def __init__(self, url: str, *, create: bool = True) -> None:
        location = parse_store_url(url)
        parsed = location.url
        #: Whether opening it created the SQLite file.
        self.created = False
        #: How a SQLite file was opened (a PostgreSQL database is always read-write).
        self.access = SqliteAccess.READ_WRITE
        #: The SQLite file's path, for raw connections (None in memory and on PostgreSQL).
        self.sqlite_path: str | None = None
        # Wakes the trigger daemons serving the same SQLite file after events commit.
        self._wakeup: WakeupSender | None = None
        #: The process's write connection to a SQLite file, shared by its writers under the write gate.
        self.shared_writer: SharedConnection | None = None
        #: Write transactions on it (`driver_write`).
        self._writers: SqliteWriters | None = None
        #: Whether a run's start and end can be one statement each (`sqlite_verbs`): a SQLite file written here.
        self.one_statement_verbs = False
        #: Copies a SQLite file's log into it after this process's commits (None: nothing to checkpoint).
        self.checkpointer: WalCheckpointer | None = None
        #: Held by every write transaction, inside the write gate: the host's lock on a SQLite file with the
        #: WAL-reset bug, else nothing.
        self.host_lock: contextlib.AbstractContextManager[Any] = _NO_HOST_LOCK
        #: PostgreSQL: each table's binary COPY types, read from the catalog once (`bulk_writes`).
        self._copy_types: dict[str, dict[str, str | None]] = {}
        if location.backend is StoreBackend.SQLITE:
            if location.path is not None:
                self.access, self.created = sqlite_access(location, create=create)
                self.sqlite_path = str(location.path)
                if local_wakeup_supported():
                    self._wakeup = WakeupSender(self.sqlite_path)
            self.engine = _sqlite_engine(location, self.access)
            if self.sqlite_path is not None and self.access is SqliteAccess.READ_WRITE:
                committed = _nothing
                if background_checkpoints():  # not on a SQLite with the WAL-reset bug (`checkpointer`)
                    self.checkpointer = WalCheckpointer(self.driver_connection)
                    committed = self.checkpointer.committed
                else:  # every write of every partita process on this host, one at a time (`host_lock`)
                    self.host_lock = HostWriteLock(self.sqlite_path, _BUSY_TIMEOUT_MS / 1000)
                self.shared_writer = SharedConnection(self._writer_connection)
                self._writers = SqliteWriters(self.shared_writer, committed, self.driver_connection, self.host_lock)
                self.one_statement_verbs = ONE_STATEMENT_VERBS
        else:
            self.engine = _postgresql_engine(parsed)
        self._url = location.display
        self._connect_url = url
        #: libpq connection string of a PostgreSQL database, credentials included (raw connections).
        self.psycopg_conninfo = parsed.set(drivername="postgresql").render_as_string(hide_password=False)
        #: The DBAPI driver's errors: raw connections raise these unwrapped.
        self.driver_errors: tuple[type[BaseException], ...] = (sqlite3.Error,)
        if location.backend is StoreBackend.POSTGRESQL:
            import psycopg

            self.driver_errors = (psycopg.Error,)
        self._dialect = location.backend.value
        self._host = current_host()

    @property
    def url(self) -> str:
        """The store's location with any password masked."""
        return self._url

    @property
    def connect_url(self) -> str:
        """The URL as given, credentials included: for worker processes, never for display."""
        return self._connect_url

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self._dialect

    @property
    def host(self) -> str:
        """This machine's host name, as run rows name their owner's."""
        return self._host

    @contextlib.contextmanager
    def failures(self, action: str) -> Iterator[None]:
        """Database and driver errors inside become `StoreError` naming the store and ``action``."""
        try:
            yield
        except SQLAlchemyError as exc:
            raise StoreError(f"store {self._url}: cannot {action}: {describe_failure(exc)}") from exc
        except (sqlite3.Error, OSError, *self.driver_errors) as exc:
            # Raw driver connections (PostgreSQL's COPY, emission) raise the driver's own errors.
            raise StoreError(f"store {self._url}: cannot {action}: {describe_failure(exc)}") from exc

    @contextlib.contextmanager
    def write(self) -> Iterator[Connection]:
        """A connection in a write transaction (SQLite: holding the write lock and the fork gate)."""
        gate = sqlite_write() if self._dialect == "sqlite" else contextlib.nullcontext()
        with gate, self.host_lock, self.engine.connect() as connection:
            connection.execution_options(partita_write=True)
            with connection.begin():
                yield connection
            assets = connection.info.pop(_EVENTS_WRITTEN, None)
        if self.checkpointer is not None:
            self.checkpointer.committed()
        self.events_committed(assets or ())

    @contextlib.contextmanager
    def driver_write(self) -> Iterator[Any]:
        """A write transaction whose body runs driver SQL only (``exec_driver_sql``, `insert`, `upsert`).

        On a SQLite file opened for writing it is the process's shared
        connection (`driver_writes`), without SQLAlchemy's cost per
        transaction and statement; elsewhere it is `write`. Statements return
        the DBAPI cursor there: use iteration, ``fetchone``, ``fetchall`` and
        ``rowcount`` only.
        """
        if self._writers is None:
            with self.write() as connection:
                yield connection
            return
        with self._writers.transaction() as transaction:
            yield transaction
        self.events_committed(transaction.info.pop(_EVENTS_WRITTEN, ()))

    def events_written(self, connection: Any, assets: Iterable[str]) -> None:
        """The write transaction of ``connection`` inserted events of ``assets``: announced once it commits."""
        if self._wakeup is not None:
            connection.info.setdefault(_EVENTS_WRITTEN, set()).update(assets)

    def events_committed(self, assets: Collection[str]) -> None:
        """Events of ``assets`` committed: wake the daemons on this machine (SQLite; PostgreSQL notifies).

        No assets, nothing to announce (`WakeupSender.send` without assets would wake every daemon).
        """
        if self._wakeup is not None and assets:
            self._wakeup.send(assets)

    def connect(self) -> Connection:
        """A pooled connection for reading (use it as a context manager)."""
        return self.engine.connect()

    def driver_sql(self, statement: str) -> str:
        """``statement`` (written with ``?`` placeholders) in this backend's placeholder style.

        Hot paths (a consumer run's start and end, claims) execute driver
        SQL: building and compiling a SQLAlchemy statement per call costs
        several times what SQLite takes to run it.
        """
        return statement if self._dialect == "sqlite" else statement.replace("?", "%s")

    def rows(self, connection: Connection, statement: str, parameters: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """Every row of driver SQL ``statement`` (``?`` placeholders) as plain tuples, through the DBAPI cursor.

        For reads of a row per key (``partita status``): 100,000 SQLAlchemy
        rows would cost more than the query.
        """
        cursor = connection.connection.cursor()
        try:
            cursor.execute(self.driver_sql(statement), parameters)
            return list(cursor.fetchall())
        finally:
            cursor.close()

    def read(self, statement: str, parameters: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Every row of driver SQL ``statement`` (``?`` placeholders) as plain tuples, on the cheapest connection.

        On a SQLite file opened for writing: the shared connection
        (`driver_write`'s, its page cache warm) when no other thread writes,
        else the thread's own reading connection. Elsewhere: a pooled
        connection's cursor.
        """
        if self._writers is not None:
            return self._writers.rows(statement, parameters)
        with self.connect() as connection:
            return self.rows(connection, statement, parameters)

    def upsert_sql(self, table: Any, keys: tuple[str, ...], only: set[str] | None = None) -> Upsert:
        """An upsert of ``table``'s rows on ``keys`` for this backend: prepare it once, run it with `upsert`.

        ``only`` limits the columns a conflict updates.
        """
        return upsert_statements(table, keys, only, dialect=self._dialect)

    def insert(
        self, connection: Connection, table: Any, rows: list[tuple[Any, ...]], skip: int = 0, shape: RowShape | None = None
    ) -> None:
        """Rows that were never written, in the backend's fastest bulk form (`bulk_writes`).

        ``skip`` leaves out leading columns the database fills (an id);
        ``shape`` names the columns rows carry when they are not whole rows.
        Events rows carry their asset first.
        """
        if table is events and rows:
            self.events_written(connection, (row[0] for row in rows))
        insert_rows(connection, self._dialect, table, rows, skip, self._copy_types, shape)

    def upsert(self, connection: Connection, upsert: Upsert, rows: list[tuple[Any, ...]]) -> None:
        """Run a prepared `upsert_sql` over plain tuples."""
        upsert_rows(connection, self._dialect, upsert, rows)

    def driver_connection(self) -> Any:
        """A new DBAPI connection outside the pool (SQLite in memory: the engine's one connection).

        Configured like the engine's own; the caller closes it.
        """
        if self._dialect == "sqlite":
            with SQLITE_CALL_GATE:  # a fork must not catch SQLite opening a file (`fork_gate`)
                connection = (
                    sqlite3.connect(
                        self.sqlite_path,
                        timeout=_BUSY_TIMEOUT_MS / 1000,
                        isolation_level=None,
                        check_same_thread=False,
                    )
                    if self.sqlite_path
                    else self.engine.raw_connection().driver_connection
                )
                configure_sqlite(connection)
            return connection
        import psycopg

        return psycopg.connect(self.psycopg_conninfo, connect_timeout=10)

    def _writer_connection(self) -> sqlite3.Connection:
        """A new connection to the SQLite file with the one-statement verbs installed (`sqlite_verbs`)."""
        return install_verbs(self.driver_connection())

    def driver_statement(self, statement: str, parameters: Any = ()) -> None:
        """Run ``statement`` committed on its own on the shared SQLite connection (`one_statement_verbs` only)."""
        assert self._writers is not None
        self._writers.statement(statement, parameters)

    def dispose(self) -> None:
        """Stop checkpointing; close the reading and shared write connections and the pool's."""
        if self.checkpointer is not None:
            self.checkpointer.close()
        if self._writers is not None:
            self._writers.close()
        if self.shared_writer is not None:
            self.shared_writer.close()
        if isinstance(self.host_lock, HostWriteLock):
            with sqlite_write():  # not while a thread of this process holds it
                self.host_lock.close()
        self.engine.dispose()

    def __repr__(self) -> str:
        return f"Database({self._url!r})"
