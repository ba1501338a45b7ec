"""Write transactions on the process's shared SQLite connection (`Database.driver_write`).

Every writer of a process takes its turn on one connection under the write
gate: its page cache stays warm, where connections taking turns re-read
every page another one changed.
"""

from __future__ import annotations

import multiprocessing
import sqlite3
import threading
from pathlib import Path

import pytest

import partita as p
from partita.errors import StoreError
from partita.store.sql import SqlStore

WAIT = 30.0


def _heartbeats(store: SqlStore) -> int:
    with store.database.connect() as connection:
        return int(connection.exec_driver_sql("SELECT COUNT(*) FROM partita_daemons").scalar_one())


def _insert_daemon(connection, name: str) -> None:
    connection.exec_driver_sql(
        "INSERT INTO partita_daemons (daemon_id, host, pid, started_at, heartbeat_at) VALUES (?, 'h', 1, 0, 0)", (name,)
    )


@pytest.fixture
def sqlite_store(tmp_path: Path):
    store = p.open_store(f"sqlite:///{tmp_path / 'partita.db'}")
    try:
        yield store
    finally:
        store.close()


def test_a_body_that_raises_rolls_its_transaction_back_and_the_connection_stays_usable(sqlite_store) -> None:
    with pytest.raises(RuntimeError), sqlite_store.database.driver_write() as connection:
        _insert_daemon(connection, "lost")
        raise RuntimeError("the body failed after its first statement")
    assert _heartbeats(sqlite_store) == 0
    with sqlite_store.database.driver_write() as connection:
        _insert_daemon(connection, "kept")
    assert _heartbeats(sqlite_store) == 1


def test_a_failing_statement_rolls_back_what_the_transaction_wrote_before_it(sqlite_store) -> None:
    with pytest.raises(sqlite3.IntegrityError), sqlite_store.database.driver_write() as connection:
        _insert_daemon(connection, "one")
        _insert_daemon(connection, "one")  # the same primary key
    assert _heartbeats(sqlite_store) == 0


def test_threads_take_turns_on_one_shared_connection(sqlite_store) -> None:
    barrier = threading.Barrier(4)
    failures: list[BaseException] = []
    used: set[int] = set()

    def writer(number: int) -> None:
        try:
            barrier.wait(WAIT)
            for index in range(25):
                with sqlite_store.database.driver_write() as connection:
                    _insert_daemon(connection, f"{number}-{index}")
                    used.add(id(connection._connection))
                    assert connection._connection.in_transaction  # nobody else's statements in between
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    threads = [threading.Thread(target=writer, args=(number,)) for number in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    assert failures == []
    assert _heartbeats(sqlite_store) == 100
    assert used == {id(sqlite_store.database.shared_writer.get())}


def test_emission_writes_on_the_same_shared_connection(sqlite_store) -> None:
    registry = p.AssetRegistry()
    keys = p.StaticPartitionDef("keys", ["a", "b"])

    @p.asset(partition_def=keys, registry=registry)
    def target() -> None:
        return None

    @p.asset(registry=registry)
    def producer(context: p.AssetContext) -> None:
        context.emit("target", partition_key="a")

    shared = sqlite_store.database.shared_writer.get()
    assert p.Flow(["producer"], registry=registry, store=sqlite_store).run().succeeded
    assert sqlite_store.database.shared_writer.get() is shared
    assert sqlite_store.event_store._writer._shared_cursor[0] is shared


def test_a_driver_error_drops_the_shared_connection_and_the_next_write_reconnects(sqlite_store) -> None:
    shared = sqlite_store.database.shared_writer
    first = shared.get()
    shared.drop()
    with pytest.raises(sqlite3.ProgrammingError):
        first.execute("SELECT 1")  # closed
    with sqlite_store.database.driver_write() as connection:
        _insert_daemon(connection, "after")
    assert shared.get() is not first
    assert _heartbeats(sqlite_store) == 1


class _RollbackFails:
    """The shared connection, except that ROLLBACK fails once armed: a fault no real call can be timed to raise.

    Everything else goes to the real SQLite connection; its cursors go
    through `_RollbackFailsCursor`, so a writer that rolls back on a cursor
    meets the same fault.
    """

    def __init__(self, real: sqlite3.Connection) -> None:
        self.real = real
        self.armed = False

    def _check(self, statement: str) -> None:
        if self.armed and statement == "ROLLBACK":
            raise sqlite3.OperationalError("cannot rollback: disk I/O error (injected)")

    def execute(self, statement: str, *parameters):
        self._check(statement)
        return self.real.execute(statement, *parameters)

    def cursor(self) -> _RollbackFailsCursor:
        return _RollbackFailsCursor(self, self.real.cursor())

    def __getattr__(self, name: str):
        return getattr(self.real, name)


class _RollbackFailsCursor:
    def __init__(self, connection: _RollbackFails, real: sqlite3.Cursor) -> None:
        self.connection = connection
        self.real = real

    def execute(self, statement: str, *parameters):
        self.connection._check(statement)  # noqa: SLF001 - the fault it injects
        self.real.execute(statement, *parameters)
        return self

    def __getattr__(self, name: str):
        return getattr(self.real, name)


def _with_rollback_failing(store: SqlStore) -> _RollbackFails:
    """The store's shared write connection replaced by one whose ROLLBACK fails; reconnecting gives a plain one."""
    shared = store.database.shared_writer
    plain = shared.connect
    shared.drop()
    failing = _RollbackFails(plain())
    shared.connect = lambda: failing if shared.connect is not plain else plain()  # noqa: E731
    shared.get()
    shared.connect = plain  # the next connection, after a drop, is a plain one
    return failing


def _write_lock_is_free(path: Path) -> bool:
    """Whether another connection takes SQLite's write lock at once."""
    other = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        other.close()


def test_a_transaction_that_cannot_roll_back_drops_the_connection_and_frees_the_write_lock(sqlite_store, tmp_path):
    failing = _with_rollback_failing(sqlite_store)
    failing.armed = True
    with pytest.raises(RuntimeError, match="body failed"), sqlite_store.database.driver_write() as connection:
        _insert_daemon(connection, "lost")
        unread = connection.exec_driver_sql("SELECT daemon_id FROM partita_daemons")  # a statement still open
        raise RuntimeError(f"the body failed after its first statement, with {unread} unread")

    assert sqlite_store.database.shared_writer.get() is not failing  # dropped, and reconnected
    assert _write_lock_is_free(tmp_path / "partita.db")  # closing it ended the transaction
    assert _heartbeats(sqlite_store) == 0
    with sqlite_store.database.driver_write() as connection:
        _insert_daemon(connection, "kept")
    assert _heartbeats(sqlite_store) == 1


def _event_item(asset: str) -> tuple[tuple, None]:
    from partita.events.identity import payload_hash
    from partita.events.model import EventDraft, EventSource, SourceKind
    from partita.store.rows import event_row

    draft = EventDraft(asset, None, None, {}, EventSource(SourceKind.EXTERNAL), None, payload_hash(asset, None, None, {}), 1.0)
    return event_row(draft), None


class _Unencodable:
    """A value the insert cannot take, raising an error that is not the driver's while it is bound."""

    def __conform__(self, protocol):
        raise RuntimeError("cannot encode this value")


def _events(store: SqlStore) -> int:
    with store.database.connect() as connection:
        return int(connection.exec_driver_sql("SELECT COUNT(*) FROM partita_events").scalar_one())


def test_an_emission_transaction_that_cannot_roll_back_drops_the_connection_and_frees_the_write_lock(
    sqlite_store, tmp_path
):
    writer = sqlite_store.event_store._writer  # noqa: SLF001 - the writer is what is tested
    failing = _with_rollback_failing(sqlite_store)
    row, _ = _event_item("plain")
    broken = (row[:3] + (_Unencodable(),) + row[4:], None)
    failing.armed = True
    # Two events without a dedupe key go through BEGIN, an INSERT each, COMMIT: the second cannot be bound.
    with pytest.raises(RuntimeError, match="cannot encode"):
        writer.commit([_event_item("plain"), broken])

    assert sqlite_store.database.shared_writer.get() is not failing
    assert _write_lock_is_free(tmp_path / "partita.db")
    assert _events(sqlite_store) == 0  # the first insert went with the transaction
    assert all(outcome[1] is None for outcome in writer.commit([_event_item("plain"), _event_item("plain")]))
    assert _events(sqlite_store) == 2


def _child_writes(url: str, queue) -> None:
    store = p.open_store(url)
    try:
        registry = p.AssetRegistry()

        @p.asset(registry=registry)
        def body() -> int:
            return 1

        queue.put(p.Flow(["body"], registry=registry, store=store).run().status.value)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        queue.put(f"{type(exc).__name__}: {exc}")
    finally:
        store.close()


def _child_writes_inherited(store: SqlStore, queue) -> None:
    try:
        with store.database.driver_write() as connection:
            _insert_daemon(connection, "child")
        queue.put(id(store.database.shared_writer.get()))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        queue.put(f"{type(exc).__name__}: {exc}")


def test_a_forked_child_writing_through_the_inherited_store_opens_its_own_shared_connection(sqlite_store) -> None:
    with sqlite_store.database.driver_write() as connection:
        _insert_daemon(connection, "parent")
    parents = sqlite_store.database.shared_writer.get()
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_child_writes_inherited, args=(sqlite_store, queue))
    child.start()
    outcome = queue.get(timeout=WAIT)
    child.join(WAIT)
    assert isinstance(outcome, int) and outcome != id(parents)
    with sqlite_store.database.driver_write() as connection:  # the parent's connection was left alone
        _insert_daemon(connection, "parent again")
    assert sqlite_store.database.shared_writer.get() is parents
    assert _heartbeats(sqlite_store) == 3


def test_a_forked_child_opens_its_own_connection_instead_of_using_the_parents(sqlite_store, tmp_path: Path) -> None:
    registry = p.AssetRegistry()

    @p.asset(registry=registry)
    def body() -> int:
        return 1

    assert p.Flow(["body"], registry=registry, store=sqlite_store).run().succeeded  # this thread's connection is open
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_child_writes, args=(f"sqlite:///{tmp_path / 'partita.db'}", queue))
    child.start()
    assert queue.get(timeout=WAIT) == "success"
    child.join(WAIT)
    assert len(sqlite_store.list_runs()) == 2


def test_a_read_only_store_refuses_a_run_start_as_read_only(tmp_path: Path) -> None:
    path = tmp_path / "partita.db"
    p.open_store(f"sqlite:///{path}").close()
    store = p.open_store(f"sqlite:///{path}?mode=ro")
    registry = p.AssetRegistry()

    @p.asset(registry=registry)
    def body() -> int:
        return 1

    try:
        with pytest.raises(StoreError, match="read-only"):
            p.Flow(["body"], registry=registry, store=store).run()
    finally:
        store.close()


def test_a_read_while_another_thread_writes_does_not_wait_and_sees_the_last_commit(sqlite_store) -> None:
    with sqlite_store.database.driver_write() as connection:
        _insert_daemon(connection, "committed")
    inside, release = threading.Event(), threading.Event()

    def hold_a_write_transaction() -> None:
        with sqlite_store.database.driver_write() as connection:
            _insert_daemon(connection, "uncommitted")
            inside.set()
            release.wait(WAIT)

    writer = threading.Thread(target=hold_a_write_transaction)
    writer.start()
    try:
        assert inside.wait(WAIT)
        rows = sqlite_store.database.read("SELECT daemon_id FROM partita_daemons ORDER BY daemon_id")
        assert rows == [("committed",)]  # read at once, beside the writer, without its open transaction
    finally:
        release.set()
        writer.join(WAIT)
    assert sqlite_store.database.read("SELECT COUNT(*) FROM partita_daemons") == [(2,)]


def test_a_read_inside_the_threads_own_transaction_sees_its_writes(sqlite_store) -> None:
    with sqlite_store.database.driver_write() as connection:
        _insert_daemon(connection, "mine")
        assert sqlite_store.database.read("SELECT COUNT(*) FROM partita_daemons") == [(1,)]
