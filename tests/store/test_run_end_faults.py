"""A run's end is recorded whatever happens to the reads and writes around it (SPEC §1.4, §6).

A finished run reads back the events it published; that read failing (a
value that cannot be decoded, a dropped PostgreSQL connection) is reported
on the result and never keeps the run's outcome from being recorded.
Transient store errors while recording a run's start, attempts and end
(SQLite "database is locked", a lost PostgreSQL connection) are retried a
few times with a short backoff, and a retry never writes a row twice.

Real faults where they can be provoked: a second SQLite connection holding
the write lock, ``pg_terminate_backend`` of the store's own connection at
the moment it executes a statement. A store method raising once stands in
where no real fault can be timed.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import sqlite3
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import event as sa_event

import partita as p
from partita.errors import StoreError
from partita.events.model import EventDraft, EventSource
from partita.results.record import AttemptRecord
from partita.store import retries
from partita.store.protocol import RunStart
from partita.store.sql import SqlStore

KEYS = ["a", "b", "c"]


def _flow(store: Any, *, emit: bool = True) -> p.Flow:
    registry = p.AssetRegistry()
    tenants = p.StaticPartitionDef("tenants", KEYS)

    @p.asset(registry=registry)
    def announced():
        return 0

    @p.asset(partition_def=tenants, registry=registry)
    def load(context):
        if emit:
            context.emit("announced", extra={"batch": 1})
        return 1

    @p.asset(partition_def=tenants, registry=registry)
    def publish(load):
        return load + 1

    return p.Flow(["publish"], registry=registry, store=store)


def _outlet_count(store: SqlStore, run_id: str) -> int:
    return len(store.list_events(run_id=run_id, kinds=[p.SourceKind.OUTLET]))


def _assert_recorded_once(store: SqlStore, result: p.RunResult) -> None:
    """The stored run is the live result: every attempt once, every outlet event once."""
    stored = store.get_run(result.run_id)
    assert stored.status == result.status.value == "success"
    assert stored.counts == {"success": 2 * len(KEYS)}
    tasks = {task.asset: task for task in store.get_tasks(result.run_id)}
    assert [attempt.index for attempt in tasks["load"].attempts] == [0, 1, 2]
    assert _outlet_count(store, result.run_id) == 2 * len(KEYS)


# -- reading the run's own events back ----------------------------------------------


@pytest.mark.parametrize(
    "fault", [RecursionError("maximum recursion depth exceeded"), StoreError("store x: cannot list events")]
)
def test_a_successful_run_is_recorded_as_success_when_reading_its_events_back_fails(store, monkeypatch, fault):
    def unreadable(*args: Any, **kwargs: Any) -> Any:
        raise fault

    monkeypatch.setattr(store, "list_events", unreadable)

    result = _flow(store).run({"partition_keys": KEYS})

    assert result.status is p.RunStatus.SUCCESS
    assert len(result.receipts) == len(KEYS)
    assert result.events == ()
    assert result.events_error is not None
    assert type(fault).__name__ in result.events_error.type
    monkeypatch.undo()
    _assert_recorded_once(store, result)
    assert store.get_run(result.run_id).header.finished_at is not None


def test_a_run_without_read_faults_reports_no_events_error(store):
    result = _flow(store).run({"partition_keys": KEYS})

    assert result.events_error is None
    assert len(result.events) == len(KEYS)


@contextlib.contextmanager
def _terminate_backend_when(store: SqlStore, matches: Callable[[str], bool], times: int = 1) -> Iterator[list[str]]:
    """Kill the store's own PostgreSQL connection as it is about to run a matching statement.

    The termination comes from a second connection and completes before the
    statement is sent, so the statement meets a connection the server closed.
    """
    import psycopg

    killed: list[str] = []
    admin = psycopg.connect(store.connect_url, autocommit=True)

    def before(connection: Any, cursor: Any, statement: str, *args: Any) -> None:
        if len(killed) < times and matches(statement):
            pid = connection.connection.driver_connection.info.backend_pid
            admin.execute("SELECT pg_terminate_backend(%s, 10000)", (pid,))
            killed.append(statement)

    engine = store._engine  # noqa: SLF001 - the only way to reach the moment a statement runs
    sa_event.listen(engine, "before_cursor_execute", before)
    try:
        yield killed
    finally:
        sa_event.remove(engine, "before_cursor_execute", before)
        admin.close()


@pytest.fixture
def pg_store(postgres_url: str) -> Iterator[SqlStore]:
    opened = p.open_store(postgres_url)
    try:
        yield opened
    finally:
        opened.close()


def _reads_run_events(statement: str) -> bool:
    text = statement.lstrip().upper()
    return text.startswith("SELECT") and "PARTITA_EVENTS" in text and "SOURCE_KIND" in text


def test_a_dropped_postgresql_connection_while_reading_the_run_events_back_is_retried(pg_store):
    with _terminate_backend_when(pg_store, _reads_run_events) as killed:
        result = _flow(pg_store).run({"partition_keys": KEYS})

    assert killed, "the run never read its events back"
    assert result.status is p.RunStatus.SUCCESS
    assert result.events_error is None
    assert len(result.events) == len(KEYS)
    _assert_recorded_once(pg_store, result)


def test_a_read_that_keeps_losing_its_postgresql_connection_still_lets_the_run_end(pg_store):
    with _terminate_backend_when(pg_store, _reads_run_events, times=100) as killed:
        result = _flow(pg_store).run({"partition_keys": KEYS})

    assert len(killed) == retries.ATTEMPTS
    assert result.status is p.RunStatus.SUCCESS
    assert result.events == ()
    assert result.events_error is not None
    _assert_recorded_once(pg_store, result)


# -- transient write errors are retried ---------------------------------------------


def _updates_run_status(statement: str) -> bool:
    return statement.lstrip().upper().startswith("UPDATE PARTITA_RUNS SET STATUS")


def _inserts_run(statement: str) -> bool:
    return statement.lstrip().upper().startswith("INSERT INTO PARTITA_RUNS")


@pytest.mark.parametrize("matches", [_inserts_run, _updates_run_status], ids=["run start", "run end"])
def test_a_dropped_postgresql_connection_while_recording_a_run_is_retried(pg_store, matches):
    """The run's end carries its last attempts and outlet events: the retry rewrites them all once."""
    with _terminate_backend_when(pg_store, matches) as killed:
        result = _flow(pg_store, emit=False).run({"partition_keys": KEYS})

    assert killed
    assert result.status is p.RunStatus.SUCCESS
    _assert_recorded_once(pg_store, result)


def test_a_run_start_that_keeps_failing_raises_store_error_before_any_body_runs(pg_store):
    ran: list[str] = []
    registry = p.AssetRegistry()

    @p.asset(registry=registry)
    def body():
        ran.append("body")

    flow = p.Flow(["body"], registry=registry, store=pg_store)
    with _terminate_backend_when(pg_store, _inserts_run, times=100) as killed, pytest.raises(StoreError):
        flow.run()

    assert len(killed) == retries.ATTEMPTS
    assert ran == []
    assert pg_store.list_runs() == []


def test_a_locked_sqlite_store_is_retried_until_the_lock_is_released(tmp_path, monkeypatch):
    """A second connection holds the write lock past the busy timeout; the retry gets through."""
    path = tmp_path / "partita.db"
    monkeypatch.setattr("partita.store.database._BUSY_TIMEOUT_MS", 50)
    store = p.open_store(f"sqlite:///{path}")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    released = threading.Event()
    pause = retries.pause

    def release_then_pause(seconds: float) -> None:
        if not released.is_set():
            holder.execute("COMMIT")  # the first write has met the lock: let the retry through
            released.set()
        pause(seconds)

    monkeypatch.setattr(retries, "pause", release_then_pause)
    try:
        result = _flow(store, emit=False).run({"partition_keys": KEYS})
        assert released.is_set(), "the write never met the lock"
        _assert_recorded_once(store, result)
    finally:
        holder.close()
        store.close()


class _LostAcknowledgement:
    """While ``method`` runs, its first write commits and then reports a lost connection."""

    def __init__(self, store: SqlStore, method: str) -> None:
        self.store, self.method, self.raised = store, method, 0
        self._inside = threading.local()

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        method = getattr(self.store, self.method)

        def committed_then_lost(write: Callable[[], Any]) -> Callable[[], Any]:
            @contextlib.contextmanager
            def transaction() -> Iterator[Any]:
                with write() as connection:
                    yield connection
                if getattr(self._inside, "active", False) and self.raised == 0:
                    self.raised += 1
                    raise _connection_lost(self.store)

            return transaction

        def statement_then_lost(run: Callable[..., None]) -> Callable[..., None]:
            def statement(*args: Any) -> None:  # SQLite's one-statement verbs (`sqlite_verbs`)
                run(*args)
                if getattr(self._inside, "active", False) and self.raised == 0:
                    self.raised += 1
                    raise _connection_lost(self.store)

            return statement

        def watched(*args: Any, **kwargs: Any) -> Any:
            self._inside.active = True
            try:
                return method(*args, **kwargs)
            finally:
                self._inside.active = False

        for name in ("write", "driver_write"):  # SQLAlchemy's transactions, and the driver's own
            monkeypatch.setattr(self.store.database, name, committed_then_lost(getattr(self.store.database, name)))
        statement = statement_then_lost(self.store.database.driver_statement)
        monkeypatch.setattr(self.store.database, "driver_statement", statement)
        monkeypatch.setattr(self.store, self.method, watched)


def _connection_lost(store: SqlStore) -> BaseException:
    from sqlalchemy.exc import OperationalError

    if store.dialect == "sqlite":
        return OperationalError("COMMIT", (), sqlite3.OperationalError("database is locked"))
    import psycopg

    return OperationalError("COMMIT", (), psycopg.OperationalError("server closed the connection unexpectedly"))


@pytest.mark.parametrize("method", ["record_run_started", "record_run_finished"])
def test_a_retry_after_a_lost_acknowledgement_writes_no_row_twice(store, monkeypatch, method):
    fault = _LostAcknowledgement(store, method)
    fault.install(monkeypatch)

    result = _flow(store, emit=False).run({"partition_keys": KEYS})

    assert fault.raised == 1
    monkeypatch.undo()
    _assert_recorded_once(store, result)


def _outlet(asset: str, key: str | None, run_id: str) -> EventDraft:
    source = EventSource(p.SourceKind.OUTLET, run_id, asset, key is not None, 1)
    return EventDraft(asset, key, None, {}, source, None, None, 1.0)


def test_a_retried_progress_batch_after_a_lost_acknowledgement_writes_no_row_twice(store, monkeypatch):
    run_id = "f" * 32
    plan = _flow(store).plan({"partition_keys": KEYS}).to_dict()
    store.record_run_started(RunStart(run_id, dt.datetime.now(dt.UTC), plan, False, "h", 1, "t"))
    records = [AttemptRecord("load", index, True, "success") for index in range(len(KEYS))]
    outlets = [_outlet("load", key, run_id) for key in KEYS]
    fault = _LostAcknowledgement(store, "record_progress")
    fault.install(monkeypatch)

    store.record_progress(records, run_id, new=True, outlets=outlets)

    assert fault.raised == 1
    monkeypatch.undo()
    (load,) = [task for task in store.get_tasks(run_id) if task.asset == "load"]
    assert [(attempt.index, attempt.status) for attempt in load.attempts] == [(i, "success") for i in range(len(KEYS))]
    assert _outlet_count(store, run_id) == len(KEYS)


def test_a_periodic_flush_that_failed_does_not_keep_the_run_end_from_being_recorded(store, monkeypatch):
    """The flusher's write fails after committing; the end replays that batch without duplicates."""
    flushed = threading.Event()
    record_batch = store.record_batch  # what the journal's flusher writes through

    def commits_then_fails(*args: Any, **kwargs: Any) -> None:
        record_batch(*args, **kwargs)
        if not flushed.is_set():
            flushed.set()
            raise StoreError("store x: cannot record attempts: server closed the connection unexpectedly")

    monkeypatch.setattr(store, "record_batch", commits_then_fails)
    registry = p.AssetRegistry()
    tenants = p.StaticPartitionDef("tenants", KEYS)

    @p.asset(partition_def=tenants, registry=registry)
    def load(context):
        if context.partition_key == "c":
            assert flushed.wait(30), "the journal never flushed while the run was going"
        return 1

    @p.asset(partition_def=tenants, registry=registry)
    def publish(load):
        return load + 1

    result = p.Flow(["publish"], registry=registry, store=store, max_concurrency=1).run({"partition_keys": KEYS})

    assert flushed.is_set()
    monkeypatch.undo()
    _assert_recorded_once(store, result)


# -- pooled connections the server closed -------------------------------------------


def _terminate_all_but(admin: Any, database: str) -> int:
    """End every other backend of ``database`` (as a server restart does); how many."""
    rows = admin.execute(
        "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
        (database,),
    ).fetchall()
    return len(rows)


def test_pooled_postgresql_connections_the_server_closed_are_replaced_on_checkout(pg_store):
    """No ping per checkout: a closed socket is seen without a round trip, and a new connection serves."""
    import psycopg

    registry = p.AssetRegistry()

    @p.asset(registry=registry)
    def body() -> int:
        return 1

    flow = p.Flow(["body"], registry=registry, store=pg_store)
    assert flow.run().succeeded  # the pool now holds connections
    database = pg_store.database.engine.url.database
    with psycopg.connect(pg_store.connect_url, autocommit=True) as admin:
        assert _terminate_all_but(admin, database) >= 1
    for _ in range(3):  # every pooled connection is checked out in turn
        assert len(pg_store.list_runs()) >= 1
    assert flow.run().succeeded
    assert len(pg_store.list_runs()) == 2
