"""`SqlStore`: the run-history store on SQLAlchemy Core, for SQLite and PostgreSQL.

SQLite runs in WAL mode with a busy timeout: readers (``partita runs list``)
never block a writing flow, and two flows writing one file wait for each
other instead of failing. Writers take the write lock up front (``BEGIN
IMMEDIATE``) so a transaction never has to upgrade its lock midway.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import socket
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Boolean, Connection, Engine, Float, Integer, create_engine, event, func, inspect, select, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import StaticPool

from partita.errors import (
    ConfigurationError,
    EmissionError,
    StoreError,
    UnknownPartitionError,
    UnknownRunError,
)
from partita.events.model import AssetEvent, EmissionReceipt, EventDraft, EventSource, SourceKind
from partita.results.model import FailureInfo
from partita.results.record import AttemptRecord, InvocationRecord, RunHeader, TaskRecord
from partita.store.fork_gate import sqlite_write
from partita.store.liveness import owner_is_alive
from partita.store.location import (
    SqliteAccess,
    StoreBackend,
    StoreLocation,
    parse_store_url,
    sqlite_access,
    sqlite_connector,
)
from partita.store.protocol import PartitionRecord, ProgressBatch, RunEnd, RunStart, StoredRun
from partita.store.retries import is_transient, retry_transient
from partita.store.schema import (
    KNOWN_REVISIONS,
    SCHEMA_HEAD,
    VERSION_TABLE,
    attempts,
    events,
    invocations,
    partition_history,
    partitions,
    runs,
)

__all__ = ["SqlStore"]

MIGRATIONS = Path(__file__).with_name("migrations")
_BUSY_TIMEOUT_MS = 30_000
_STALE_HEARTBEAT_SECONDS = 60.0
_PG_MIGRATION_LOCK = 0x70A271  # any constant: serializes concurrent first opens


def _utc(timestamp: float | None) -> dt.datetime | None:
    return None if timestamp is None else dt.datetime.fromtimestamp(timestamp, dt.UTC)


_PG_ARRAY_TYPES = {Float: "float8[]", Integer: "int8[]", Boolean: "bool[]"}


def _upsert_sql(table: Any, keys: tuple[str, ...], only: set[str] | None = None, *, unnest: bool) -> str:
    """Driver SQL upserting rows of ``table``; ``only`` limits the columns a conflict updates.

    ``unnest`` (PostgreSQL): one statement per batch, each column one array.
    Otherwise one row per execution with ``?`` placeholders (SQLite's ``executemany``).
    """
    names = [column.name for column in table.columns]
    if unnest:
        arrays = ", ".join(f"%s::{_PG_ARRAY_TYPES.get(type(column.type), 'text[]')}" for column in table.columns)
        rows = f"SELECT * FROM unnest({arrays})"
    else:
        rows = f"VALUES ({', '.join('?' * len(names))})"
    updates = ", ".join(
        f"{name} = excluded.{name}" for name in names if name not in keys and (only is None or name in only)
    )
    return (
        f"INSERT INTO {table.name} ({', '.join(names)}) {rows} ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {updates}"
    )


def _replayed(batch: ProgressBatch) -> ProgressBatch:
    """The batch as a retry writes it: its first write may have committed."""
    return batch if batch.replay else dataclasses.replace(batch, replay=True)


def _event_row(draft: EventDraft) -> tuple[Any, ...]:
    """An events row without its id, in table column order."""
    source = draft.source
    return (
        draft.asset,
        draft.partition_key,
        None if draft.partition_date is None else draft.partition_date.isoformat(),
        json.dumps(draft.extra, separators=(",", ":")) if draft.extra else "{}",
        draft.timestamp if isinstance(draft.timestamp, float) else draft.timestamp.timestamp(),
        source.kind.value,
        source.run_id,
        source.asset,
        source.partition_key_present,
        source.invocation,
        draft.dedupe_key,
        draft.payload_hash,
    )


def _partition_of(row: Any) -> PartitionRecord:
    return PartitionRecord(
        domain=row.domain,
        key=row.partition_key,
        first_seen=_utc(row.first_seen),  # type: ignore[arg-type]
        last_seen=_utc(row.last_seen),  # type: ignore[arg-type]
        retired=bool(row.retired),
        retired_at=_utc(row.retired_at),
        reactivated_at=_utc(row.reactivated_at),
        last_run_id=row.last_run_id,
    )


def _event_of(row: Any) -> AssetEvent:
    return AssetEvent(
        id=int(row.id),
        asset=row.asset,
        partition_key=row.partition_key,
        partition_date=None if row.partition_date is None else dt.datetime.fromisoformat(row.partition_date),
        extra=json.loads(row.extra),
        timestamp=_utc(row.timestamp),  # type: ignore[arg-type]
        source=EventSource(
            kind=SourceKind(row.source_kind),
            run_id=row.source_run_id,
            asset=row.source_asset,
            partition_key_present=None if row.source_key_present is None else bool(row.source_key_present),
            invocation=row.source_invocation,
        ),
    )


def _configure_sqlite(connection: Any) -> None:
    """WAL with a busy timeout: readers never block a writer, writers wait for each other.

    ``synchronous=NORMAL`` in WAL mode: a committed transaction survives a
    crash of the process; the last transactions may be lost on power loss.
    """
    connection.isolation_level = None  # partita issues BEGIN itself
    cursor = connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
    with contextlib.suppress(sqlite3.OperationalError):  # read-only files keep their mode
        cursor.execute("PRAGMA journal_mode = WAL")
    cursor.execute("PRAGMA synchronous = NORMAL")
    cursor.execute("PRAGMA foreign_keys = ON")
    cursor.close()


def _migration_context(connection: Connection) -> MigrationContext:
    return MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})


class SqlStore:
    """Run history in a SQL database named by a URL.

    ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db``,
    ``sqlite://`` (in memory, this process only) or
    ``postgresql://user:password@host:port/database``.
    """

    def __init__(self, url: str, *, create: bool = True) -> None:
        location = parse_store_url(url)
        parsed = location.url
        backend = location.backend.value
        self.created = False
        self._sqlite_path: str | None = None
        self._access = SqliteAccess.READ_WRITE
        if location.backend is StoreBackend.SQLITE:
            self._engine = self._sqlite_engine(location, create)
        else:
            self._engine = self._postgresql_engine(parsed)
        self._url = location.display
        self._connect_url = url
        self._local = threading.local()
        self._emission_lock = threading.Lock()
        self._emission_connections: list[Any] = []
        self._psycopg_conninfo = parsed.set(drivername="postgresql").render_as_string(hide_password=False)
        self._driver_errors: tuple[type[BaseException], ...] = (sqlite3.Error,)
        if backend == "postgresql":
            import psycopg

            self._driver_errors = (psycopg.Error,)
        self._dialect = backend
        self._host = socket.gethostname()
        try:
            self._migrate()
        except BaseException:
            self._engine.dispose()
            raise
        self._prepare_upserts()
        self._prepare_event_statements()

    # -- opening ----------------------------------------------------------------

    def _sqlite_engine(self, location: StoreLocation, create: bool) -> Engine:
        if location.path is None:
            engine = create_engine("sqlite://", poolclass=StaticPool, connect_args={"check_same_thread": False})
        else:
            self._access, self.created = sqlite_access(location, create=create)
            self._sqlite_path = str(location.path)
            timeout = _BUSY_TIMEOUT_MS / 1000
            connector = sqlite_connector(location.path, self._access, timeout)
            file_url = location.url.set(drivername="sqlite", query={})
            if connector is None:
                engine = create_engine(file_url, connect_args={"timeout": timeout, "check_same_thread": False})
            else:
                engine = create_engine(file_url, creator=connector)

        @event.listens_for(engine, "connect")
        def _configure(dbapi_connection: Any, _: Any) -> None:
            _configure_sqlite(dbapi_connection)

        @event.listens_for(engine, "begin")
        def _begin(connection: Connection) -> None:
            writing = connection.get_execution_options().get("partita_write", False)
            connection.exec_driver_sql("BEGIN IMMEDIATE" if writing else "BEGIN")

        return engine

    def _postgresql_engine(self, url: Any) -> Engine:
        try:
            import psycopg  # noqa: F401
        except ImportError:
            raise ConfigurationError(
                "a postgresql:// store needs psycopg; install it with: pip install 'partita[postgres]'"
            ) from None
        return create_engine(
            url.set(drivername="postgresql+psycopg"),
            pool_pre_ping=True,
            pool_size=2,
            connect_args={"connect_timeout": 10},
        )

    def _describe_failure(self, exc: BaseException) -> str:
        original = getattr(exc, "orig", None) or exc
        text = str(original).strip().splitlines()[0] if str(original).strip() else type(original).__name__
        if "file is not a database" in text or "malformed" in text:
            return "the file is not a SQLite database or is corrupt; nothing was written to it"
        if "readonly" in text or "read-only" in text:
            return "the store is read-only; nothing can be written to it"
        return text

    @contextlib.contextmanager
    def _failures(self, action: str) -> Iterator[None]:
        try:
            yield
        except SQLAlchemyError as exc:
            raise StoreError(f"store {self._url}: cannot {action}: {self._describe_failure(exc)}") from exc
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"store {self._url}: cannot {action}: {self._describe_failure(exc)}") from exc

    @contextlib.contextmanager
    def _write(self) -> Iterator[Connection]:
        gate = sqlite_write() if self._dialect == "sqlite" else contextlib.nullcontext()
        with gate, self._engine.connect() as connection:
            connection.execution_options(partita_write=True)
            with connection.begin():
                yield connection

    def _migrate(self) -> None:
        with self._failures("open it"):
            with self._engine.connect() as connection:
                current = _migration_context(connection).get_current_revision()
            if current == SCHEMA_HEAD:
                return
            if current is not None and current not in KNOWN_REVISIONS:
                raise StoreError(
                    f"store {self._url} has schema revision {current}, newer than this partita understands "
                    f"(newest known: {SCHEMA_HEAD}); upgrade partita to use it"
                )
            if self._access is not SqliteAccess.READ_WRITE:
                raise StoreError(
                    f"store {self._url} is opened read-only and its schema is not this partita's "
                    f"({current or 'none'}, needs {SCHEMA_HEAD}); open it once writable so it can be upgraded"
                )
            with self._write() as connection:
                if self._dialect == "postgresql":
                    connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PG_MIGRATION_LOCK})")
                current = _migration_context(connection).get_current_revision()
                if current == SCHEMA_HEAD:
                    return
                if current is None:
                    foreign = [
                        name for name in inspect(connection).get_table_names() if not name.startswith("partita_")
                    ]
                    if foreign:
                        raise StoreError(
                            f"store {self._url} is a database with other tables and no partita schema; "
                            "point the store at a new file or an empty database"
                        )
                config = Config()
                config.set_main_option("script_location", str(MIGRATIONS))
                config.attributes["connection"] = connection
                config.attributes["version_table"] = VERSION_TABLE
                command.upgrade(config, "head")

    def _prepare_upserts(self) -> None:
        """Upsert statements as driver SQL: rows go to ``executemany`` as plain tuples.

        Skipping per-row parameter processing halves the writer's cost; the
        SQL is the same on SQLite and PostgreSQL apart from where the rows come from.
        """
        unnest = self._dialect == "postgresql"
        self._upsert_attempts = _upsert_sql(attempts, ("run_id", "asset", "idx"), unnest=unnest)
        self._upsert_invocations = _upsert_sql(invocations, ("run_id", "asset", "idx", "number"), unnest=unnest)
        # A rediscovered key keeps its first-seen time and becomes active again.
        self._registry_upsert = _upsert_sql(
            partitions, ("domain", "partition_key"), {"last_seen", "last_run_id", "retired"}, unnest=unnest
        )

    def _prepare_event_statements(self) -> None:
        """Driver SQL for emission and run starts: no statement construction per call."""
        run_columns = [
            "run_id", "status", "started_at", "targets", "selection_kind", "domain", "key_count", "attempt_count",
            "plan", "record_partition_keys", "owner_host", "owner_pid", "owner_token", "heartbeat_at",
        ]  # fmt: skip
        self._run_start_sql = self.driver_sql(
            f"INSERT INTO {runs.name} ({', '.join(run_columns)}) VALUES ({', '.join('?' * len(run_columns))})"
        )
        columns = [column.name for column in list(events.columns)[1:]]
        self._event_insert_sql = self.driver_sql(
            f"INSERT INTO {events.name} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))}) "
            "ON CONFLICT (dedupe_key) WHERE dedupe_key IS NOT NULL DO NOTHING RETURNING id"
        )
        self._event_lookup_sql = self.driver_sql(
            f"SELECT id, timestamp, payload_hash FROM {events.name} WHERE dedupe_key = ?"
        )

    @property
    def url(self) -> str:
        return self._url

    @property
    def connect_url(self) -> str:
        """The URL as given, credentials included: for worker processes, never for display."""
        return self._connect_url

    @property
    def dialect(self) -> str:
        return self._dialect

    # -- writing -----------------------------------------------------------------

    def driver_sql(self, statement: str) -> str:
        """``statement`` (written with ``?`` placeholders) in this backend's placeholder style.

        Hot paths (a consumer run's start and end, claims) execute driver
        SQL: building and compiling a SQLAlchemy statement per call costs
        several times what SQLite takes to run it.
        """
        return statement if self._dialect == "sqlite" else statement.replace("?", "%s")

    def record_run_started(self, run: RunStart) -> None:
        """Insert the run's row; a transient failure is retried, and a retry never inserts it twice.

        Raises StoreError when the row cannot be written (the run must not start).
        """
        plan = run.plan
        started = run.started_at.timestamp()
        values = (
            run.run_id,
            "running",
            started,
            json.dumps(plan["targets"]),
            plan["selection"]["kind"],
            plan["selection"]["domain"],
            plan["selection"]["key_count"],
            plan["attempt_count"],
            json.dumps(plan),
            run.record_partition_keys,
            run.owner_host,
            run.owner_pid,
            run.owner_token,
            started,
        )

        def insert(number: int) -> None:
            with self._write() as connection:
                if number and self._run_row_is(connection, run.run_id, run.owner_token, started):
                    return  # an earlier try committed; only its acknowledgement was lost
                connection.exec_driver_sql(self._run_start_sql, values)

        with self._failures("record the run's start"):
            retry_transient(insert)

    def _run_row_is(self, connection: Connection, run_id: str, owner_token: str, started: float) -> bool:
        """Whether this run's row exists as this owner wrote it (not another run with the same id)."""
        row = connection.exec_driver_sql(
            self.driver_sql(f"SELECT owner_token, started_at FROM {runs.name} WHERE run_id = ?"), (run_id,)
        ).first()
        return row is not None and row[0] == owner_token and row[1] == started

    def record_progress(
        self,
        records: Sequence[AttemptRecord],
        run_id: str,
        *,
        new: bool = False,
        outlets: Sequence[EventDraft] = (),
        replay: bool = False,
    ) -> None:
        if not records:
            return
        batch = ProgressBatch(records, new, outlets, replay)

        def write(number: int) -> None:
            with self._write() as connection:
                self._write_progress(connection, run_id, _replayed(batch) if number else batch)

        with self._failures("record attempts"):
            retry_transient(write)

    def _write_progress(self, connection: Connection, run_id: str, batch: ProgressBatch) -> None:
        """Attempt, invocation and outlet rows of one batch.

        A replay (a retry, or a batch whose earlier write had an unknown
        outcome) writes idempotently: attempts and invocations are upserted
        and outlet events already stored for their attempt are left out.
        """
        replay = batch.replay
        latest: dict[tuple[str, int], AttemptRecord] = {}
        for record in batch.attempts:
            latest[(record.asset, record.index)] = record
        if not latest:
            return
        attempt_rows = []
        invocation_rows = []
        for record in latest.values():
            failure = record.failure
            attempt_rows.append(
                (
                    run_id,
                    record.asset,
                    record.index,
                    record.status,
                    record.reason,
                    record.partition_key_present,
                    record.partition_key,
                    len(record.invocations),
                    record.started_at,
                    record.finished_at,
                    record.duration,
                    None if failure is None else failure.type,
                    None if failure is None else failure.message,
                    None if failure is None else failure.traceback,
                    json.dumps(record.blocked_by) if record.blocked_by else None,
                    record.resolution,
                    record.materialization_id,
                )
            )
            # One successful invocation is fully described by its attempt row;
            # only retried or failed attempts need invocation rows.
            if len(record.invocations) > 1 or (record.invocations and not record.invocations[0].succeeded):
                invocation_rows.extend(
                    (
                        run_id,
                        record.asset,
                        record.index,
                        invocation.number,
                        invocation.started_at,
                        invocation.finished_at,
                        invocation.succeeded,
                        invocation.failure_type,
                        invocation.failure_message,
                    )
                    for invocation in record.invocations
                )
        if batch.new and not replay:
            self._insert(connection, attempts, attempt_rows)
            if invocation_rows:
                self._insert(connection, invocations, invocation_rows)
        else:
            self._upsert(connection, self._upsert_attempts, attempt_rows)
            if invocation_rows:
                self._upsert(connection, self._upsert_invocations, invocation_rows)
        outlets = batch.outlets
        if outlets and replay:
            outlets = self._unstored_outlets(connection, run_id, outlets)
        if outlets:
            # Outlet events commit in the same transaction as the successes they announce.
            self._insert(connection, events, [_event_row(draft) for draft in outlets], skip=1)

    def _unstored_outlets(self, connection: Connection, run_id: str, outlets: Sequence[EventDraft]) -> list[EventDraft]:
        """The outlet events not yet stored: a run announces each (asset, key) success once."""
        stored: set[tuple[str, str | None]] = set()
        names = sorted({draft.asset for draft in outlets})
        query = (
            f"SELECT asset, partition_key FROM {events.name} WHERE source_run_id = ? AND source_kind = ? "
            f"AND asset IN ({', '.join('?' * len(names))})"
        )
        for asset, key in connection.exec_driver_sql(
            self.driver_sql(query), (run_id, SourceKind.OUTLET.value, *names)
        ):
            stored.add((asset, key))
        return [draft for draft in outlets if (draft.asset, draft.partition_key) not in stored]

    def _insert(self, connection: Connection, table: Any, rows: list[tuple[Any, ...]], skip: int = 0) -> None:
        """Rows that were never written: the backend's fastest bulk insert.

        ``skip`` leaves out leading columns the database fills (an id).
        """
        columns = list(table.columns)[skip:]
        names = ", ".join(column.name for column in columns)
        if self._dialect == "postgresql":
            driver = connection.connection.driver_connection
            assert driver is not None
            with driver.cursor() as cursor, cursor.copy(f"COPY {table.name} ({names}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        else:
            marks = ", ".join("?" * len(columns))
            connection.exec_driver_sql(f"INSERT INTO {table.name} ({names}) VALUES ({marks})", rows)

    def _upsert(self, connection: Connection, statement: str, rows: list[tuple[Any, ...]]) -> None:
        if self._dialect == "postgresql":
            # One statement per batch: each column travels as one array.
            connection.exec_driver_sql(statement, tuple(list(column) for column in zip(*rows, strict=True)))
        else:
            connection.exec_driver_sql(statement, rows)

    def record_heartbeat(self, run_id: str, at: float) -> None:
        def write(_: int) -> None:
            with self._write() as connection:
                connection.exec_driver_sql(
                    self.driver_sql(f"UPDATE {runs.name} SET heartbeat_at = ? WHERE run_id = ?"), (at, run_id)
                )

        with self._failures("record a heartbeat"):
            retry_transient(write)

    def record_run_finished(self, end: RunEnd, progress: Sequence[ProgressBatch] = ()) -> None:
        """The last attempts and the outcome: one transaction, one fsync; retried when transient."""
        finished = end.finished_at.timestamp()

        def write(number: int) -> None:
            with self._write() as connection:
                for batch in progress:
                    self._write_progress(connection, end.run_id, _replayed(batch) if number else batch)
                connection.exec_driver_sql(
                    self.driver_sql(
                        f"UPDATE {runs.name} SET status = ?, finished_at = ?, heartbeat_at = ?, summary = ? "
                        "WHERE run_id = ?"
                    ),
                    (end.status, finished, finished, json.dumps(end.summary), end.run_id),
                )

        with self._failures("record the run's end"):
            retry_transient(write)

    # -- events --------------------------------------------------------------------

    def record_event(self, draft: EventDraft) -> EmissionReceipt:
        """Insert the event unless its dedupe identity exists; durable when this returns.

        A lost acknowledgement is retried: the dedupe identity turns the retry
        into the first event's receipt instead of a second event.
        """
        row = _event_row(draft)

        def insert(_: int) -> tuple[Any, Any]:
            try:
                return self._insert_event(row, draft.dedupe_key)
            except self._driver_errors:
                self._drop_emission_connection()  # the next try reconnects
                raise

        # SQLite already waited out its busy timeout; a lost PostgreSQL
        # connection is retried, and the dedupe identity makes that safe.
        transient = (lambda exc: False) if self._dialect == "sqlite" else is_transient
        try:
            inserted, existing = retry_transient(insert, transient=transient)
        except self._driver_errors as exc:
            raise StoreError(f"store {self._url}: cannot record the event: {self._describe_failure(exc)}") from exc
        if inserted is not None:
            return EmissionReceipt(int(inserted), draft.timestamp)  # type: ignore[arg-type]
        existing_id, existing_timestamp, existing_hash = existing
        if existing_hash != draft.payload_hash:
            raise EmissionError(
                "emit: dedupe_key was already used for a different event (asset, key, date or extra differ); "
                "a dedupe key identifies exactly one event"
            )
        return EmissionReceipt(int(existing_id), _utc(existing_timestamp), duplicate=True)  # type: ignore[arg-type]

    def _emission_connection(self) -> Any:
        """A DBAPI connection of this thread's own, outside the pool.

        Emission commits one event per call; skipping pool checkout and
        statement construction keeps it close to the driver's own speed.
        """
        connection = getattr(self._local, "connection", None)
        if connection is None:
            if self._dialect == "sqlite":
                connection = (
                    sqlite3.connect(
                        self._sqlite_path,
                        timeout=_BUSY_TIMEOUT_MS / 1000,
                        isolation_level=None,
                        check_same_thread=False,
                    )
                    if self._sqlite_path
                    else self._engine.raw_connection().driver_connection
                )
                _configure_sqlite(connection)
            else:
                import psycopg

                connection = psycopg.connect(self._psycopg_conninfo, connect_timeout=10)
            self._local.connection = connection
            with self._emission_lock:
                self._emission_connections.append(connection)
        return connection

    def _drop_emission_connection(self) -> None:
        connection = getattr(self._local, "connection", None)
        self._local.connection = None
        if connection is not None:
            with contextlib.suppress(Exception):
                connection.close()

    def _insert_event(self, row: tuple[Any, ...], dedupe_key: str) -> tuple[Any, Any]:
        connection = self._emission_connection()
        if self._dialect == "sqlite":
            cursor = connection.cursor()
            try:
                with sqlite_write():
                    cursor.execute("BEGIN IMMEDIATE")
                    try:
                        found = cursor.execute(self._event_insert_sql, row).fetchone()
                        existing = (
                            None
                            if found is not None
                            else cursor.execute(self._event_lookup_sql, (dedupe_key,)).fetchone()
                        )
                        cursor.execute("COMMIT")
                    except BaseException:
                        with contextlib.suppress(sqlite3.Error):
                            cursor.execute("ROLLBACK")
                        raise
            finally:
                cursor.close()
        else:
            try:
                with connection.cursor() as cursor:
                    found = cursor.execute(self._event_insert_sql, row).fetchone()
                    existing = (
                        None if found is not None else cursor.execute(self._event_lookup_sql, (dedupe_key,)).fetchone()
                    )
                connection.commit()
            except BaseException:
                with contextlib.suppress(Exception):
                    connection.rollback()
                raise
        return (None if found is None else found[0]), existing

    def list_events(
        self,
        *,
        asset: str | None = None,
        partition_key: str | None = None,
        since: int | None = None,
        limit: int | None = None,
        run_id: str | None = None,
        kinds: Sequence[SourceKind] | None = None,
    ) -> list[AssetEvent]:
        """Events in id order, filtered; ``since`` excludes ids up to and including it."""
        query = select(events).order_by(events.c.id)
        if asset is not None:
            query = query.where(events.c.asset == asset)
        if partition_key is not None:
            query = query.where(events.c.partition_key == partition_key)
        if since is not None:
            query = query.where(events.c.id > since)
        if run_id is not None:
            query = query.where(events.c.source_run_id == run_id)
        if kinds is not None:
            query = query.where(events.c.source_kind.in_([kind.value for kind in kinds]))
        if limit is not None:
            query = query.limit(limit)

        def read(_: int) -> list[AssetEvent]:
            with self._engine.connect() as connection:
                return [_event_of(row) for row in connection.execute(query)]

        with self._failures("list events"):
            return retry_transient(read)

    def list_events_by_ids(self, ids: Sequence[int]) -> list[AssetEvent]:
        """These events, in id order (unknown ids are skipped)."""
        found: list[AssetEvent] = []
        wanted = sorted(set(ids))
        with self._failures("read events"), self._engine.connect() as connection:
            for start in range(0, len(wanted), 500):
                chunk = wanted[start : start + 500]
                query = f"SELECT * FROM {events.name} WHERE id IN ({', '.join('?' * len(chunk))}) ORDER BY id"
                found.extend(_event_of(row) for row in connection.exec_driver_sql(self.driver_sql(query), tuple(chunk)))
        return found

    # -- the partition registry of runtime domains ------------------------------------

    def record_discovery(self, domain: str, run_id: str, drafts: Sequence[EventDraft]) -> None:
        """Discovery events and the registry update in one transaction.

        New keys get a first-seen time; known keys a new last-seen time; a
        retired key discovered again becomes active, and that is recorded in
        the key's history.
        """
        now = dt.datetime.now(dt.UTC).timestamp()
        keys = [draft.partition_key for draft in drafts]
        with self._failures("record the discovery"), self._write() as connection:
            if drafts:
                self._insert(connection, events, [_event_row(draft) for draft in drafts], skip=1)
            retired = {
                row[0]
                for row in connection.execute(
                    select(partitions.c.partition_key).where(partitions.c.domain == domain, partitions.c.retired)
                )
            }
            rows = [(domain, key, now, now, False, None, None, run_id) for key in keys]
            if rows:
                self._upsert(connection, self._registry_upsert, rows)
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

    def list_partitions(self, domain: str) -> list[PartitionRecord]:
        """Every key the domain's producers ever discovered, in first-seen order."""
        query = (
            select(partitions)
            .where(partitions.c.domain == domain)
            .order_by(partitions.c.first_seen, partitions.c.partition_key)
        )
        with self._failures("list partitions"), self._engine.connect() as connection:
            return [_partition_of(row) for row in connection.execute(query)]

    def retire_partition(self, domain: str, key: str) -> PartitionRecord:
        """Mark a known key retired (recorded in its history); retiring it again changes nothing."""
        now = dt.datetime.now(dt.UTC).timestamp()
        with self._failures("retire the partition"), self._write() as connection:
            row = connection.execute(
                select(partitions).where(partitions.c.domain == domain, partitions.c.partition_key == key)
            ).first()
            if row is None:
                raise UnknownPartitionError(
                    f"domain {domain} has no known partition with that key; `partita partitions ENTRY --domain` "
                    "lists the known keys"
                )
            if not row.retired:
                connection.execute(
                    update(partitions)
                    .where(partitions.c.domain == domain, partitions.c.partition_key == key)
                    .values(retired=True, retired_at=now)
                )
                connection.execute(
                    partition_history.insert().values(domain=domain, partition_key=key, action="retired", at=now)
                )
            row = connection.execute(
                select(partitions).where(partitions.c.domain == domain, partitions.c.partition_key == key)
            ).one()
        return _partition_of(row)

    def partition_history(self, domain: str, key: str) -> list[tuple[str, dt.datetime, str | None]]:
        """(action, time, run id) transitions of one key, oldest first."""
        query = (
            select(partition_history.c.action, partition_history.c.at, partition_history.c.run_id)
            .where(partition_history.c.domain == domain, partition_history.c.partition_key == key)
            .order_by(partition_history.c.id)
        )
        with self._failures("read the partition history"), self._engine.connect() as connection:
            return [(action, _utc(at), run) for action, at, run in connection.execute(query)]  # type: ignore[misc]

    # -- reading -----------------------------------------------------------------

    def _status(self, row: Any) -> str:
        if row.status != "running":
            return str(row.status)
        if row.owner_host == self._host:
            alive = owner_is_alive(row.owner_pid, row.owner_token)
        else:
            alive = dt.datetime.now(dt.UTC).timestamp() - row.heartbeat_at < _STALE_HEARTBEAT_SECONDS
        return "running" if alive else "interrupted"

    def _stored(self, row: Any, counts: dict[str, int]) -> StoredRun:
        summary = json.loads(row.summary) if row.summary else {}
        status = self._status(row)
        if status == "interrupted" and "running" in counts:
            counts = dict(counts)
            counts["interrupted"] = counts.pop("running")
        header = RunHeader(
            run_id=row.run_id,
            status=status,
            started_at=_utc(row.started_at),  # type: ignore[arg-type]
            finished_at=_utc(row.finished_at),
            targets=tuple(json.loads(row.targets)),
            selection_kind=row.selection_kind,
            domain=row.domain,
            key_count=row.key_count,
            resources=summary.get("resources", {}),
            callback_errors=tuple(summary.get("callback_errors", ())),
            discovered_key_counts=summary.get("discovered_key_counts", {}),
        )
        return StoredRun(
            header=header,
            attempt_count=row.attempt_count,
            plan=json.loads(row.plan),
            record_partition_keys=bool(row.record_partition_keys),
            counts=counts,
        )

    def _counts(self, connection: Connection, run_ids: Sequence[str]) -> dict[str, dict[str, int]]:
        counts: dict[str, dict[str, int]] = {run_id: {} for run_id in run_ids}
        if not run_ids:
            return counts
        query = (
            select(attempts.c.run_id, attempts.c.status, func.count())
            .where(attempts.c.run_id.in_(run_ids))
            .group_by(attempts.c.run_id, attempts.c.status)
        )
        for run_id, status, count in connection.execute(query):
            counts[run_id][status] = count
        return counts

    def list_runs(self, *, limit: int = 20, status: str | None = None) -> list[StoredRun]:
        query = select(runs).order_by(runs.c.started_at.desc())
        if status in ("running", "interrupted"):
            query = query.where(runs.c.status == "running")
        elif status is not None:
            query = query.where(runs.c.status == status).limit(limit)
        else:
            query = query.limit(limit)
        with self._failures("list runs"), self._engine.connect() as connection:
            rows = list(connection.execute(query))
            if status in ("running", "interrupted"):
                rows = [row for row in rows if self._status(row) == status][:limit]
            counts = self._counts(connection, [row.run_id for row in rows])
        return [self._stored(row, counts[row.run_id]) for row in rows]

    def _find(self, connection: Connection, run_id: str) -> Any:
        row = connection.execute(select(runs).where(runs.c.run_id == run_id)).first()
        if row is not None:
            return row
        if len(run_id) >= 4 and run_id.isalnum():
            matches = list(connection.execute(select(runs).where(runs.c.run_id.like(f"{run_id}%")).limit(2)))
            if len(matches) == 1:
                return matches[0]
            if len(matches) > 1:
                raise UnknownRunError(f"run id prefix {run_id!r} matches several runs; give more characters")
        raise UnknownRunError(f"no run with id {run_id!r} in store {self._url}")

    def get_run(self, run_id: str) -> StoredRun:
        with self._failures("read the run"), self._engine.connect() as connection:
            row = self._find(connection, run_id)
            counts = self._counts(connection, [row.run_id])
        return self._stored(row, counts[row.run_id])

    def get_tasks(self, run_id: str) -> list[TaskRecord]:
        with self._failures("read the run's attempts"), self._engine.connect() as connection:
            row = self._find(connection, run_id)
            run_status = self._status(row)
            attempt_rows = list(
                connection.execute(
                    select(attempts).where(attempts.c.run_id == row.run_id).order_by(attempts.c.asset, attempts.c.idx)
                )
            )
            invocation_rows = list(
                connection.execute(
                    select(invocations)
                    .where(invocations.c.run_id == row.run_id)
                    .order_by(invocations.c.asset, invocations.c.idx, invocations.c.number)
                )
            )
        by_attempt: dict[tuple[str, int], list[InvocationRecord]] = {}
        for inv in invocation_rows:
            by_attempt.setdefault((inv.asset, inv.idx), []).append(
                InvocationRecord(
                    inv.number,
                    inv.started_at,
                    inv.finished_at,
                    bool(inv.succeeded),
                    inv.failure_type,
                    inv.failure_message,
                )
            )
        by_asset: dict[str, list[AttemptRecord]] = {}
        for att in attempt_rows:
            status = att.status
            if status == "running" and run_status == "interrupted":
                status = "interrupted"
            failure = None
            if att.failure_type is not None:
                failure = FailureInfo(att.failure_type, att.failure_message or "", att.failure_traceback or "")
            by_asset.setdefault(att.asset, []).append(
                AttemptRecord(
                    asset=att.asset,
                    index=att.idx,
                    partition_key_present=bool(att.partition_key_present),
                    status=status,
                    reason=att.reason,
                    partition_key=att.partition_key,
                    blocked_by=tuple((a, i) for a, i in json.loads(att.blocked_by)) if att.blocked_by else (),
                    invocations=self._invocations_of(att, by_attempt),
                    started_at=att.started_at,
                    finished_at=att.finished_at,
                    duration=att.duration,
                    failure=failure,
                    resolution=att.resolution,
                    materialization_id=att.materialization_id,
                )
            )
        plan = json.loads(row.plan)
        empty = plan["selection"]["kind"] == "empty"

        def skip_reason(task: dict[str, Any]) -> str | None:
            if empty and task["partitioned"]:
                return "no_partition_keys"
            # A cancelled run wrote every attempt it had: a task with none never got its keys.
            return "cancelled" if run_status == "cancelled" and task["name"] not in by_asset else None

        return [
            TaskRecord(
                asset=task["name"],
                partitioned=task["partitioned"],
                attempts=tuple(by_asset.get(task["name"], ())),
                skip_reason=skip_reason(task),
            )
            for task in plan["tasks"]
        ]

    @staticmethod
    def _invocations_of(
        attempt: Any, by_attempt: dict[tuple[str, int], list[InvocationRecord]]
    ) -> tuple[InvocationRecord, ...]:
        stored = by_attempt.get((attempt.asset, attempt.idx))
        if stored:
            return tuple(stored)
        if attempt.invocations == 1:  # a single invocation lives on the attempt row
            succeeded = attempt.status == "success"
            return (
                InvocationRecord(
                    1,
                    attempt.started_at,
                    attempt.finished_at,
                    succeeded,
                    None if succeeded else attempt.failure_type,
                    None if succeeded else attempt.failure_message,
                ),
            )
        return ()

    def close(self) -> None:
        with self._emission_lock:
            connections, self._emission_connections = self._emission_connections, []
        for connection in connections:
            with contextlib.suppress(Exception):
                connection.close()
        self._engine.dispose()

    def __repr__(self) -> str:
        return f"SqlStore({self._url!r})"
