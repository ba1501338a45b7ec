"""Write transactions on each thread's own SQLite connection (`Database.driver_write`)."""

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


def test_threads_write_through_connections_of_their_own(sqlite_store) -> None:
    barrier = threading.Barrier(4)
    failures: list[BaseException] = []

    def writer(number: int) -> None:
        try:
            barrier.wait(WAIT)
            for index in range(25):
                with sqlite_store.database.driver_write() as connection:
                    _insert_daemon(connection, f"{number}-{index}")
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    threads = [threading.Thread(target=writer, args=(number,)) for number in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    assert failures == []
    assert _heartbeats(sqlite_store) == 100


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
