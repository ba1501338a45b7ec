"""A process forked while another thread writes to a SQLite store can still write to it.

SQLite shares a process's lock bookkeeping between its connections to a
file; a child forked during another thread's write transaction inherits it
and can never take the write lock. The store makes a fork wait for open
SQLite write transactions (the process executor forks emitting workers).
"""

from __future__ import annotations

import multiprocessing
import sqlite3
import sys
import threading
from pathlib import Path

import pytest

from partita.store.sql import SqlStore

from .conftest import hung_children, running_constantly

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers are forked on Linux only")


def _write_in_child(path: str, results: multiprocessing.Queue) -> None:
    try:
        connection = sqlite3.connect(path, timeout=2.0, isolation_level=None)
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("CREATE TABLE IF NOT EXISTS child_writes (n INTEGER)")
        connection.execute("INSERT INTO child_writes VALUES (1)")
        connection.execute("COMMIT")
        results.put("written")
    except sqlite3.Error as exc:
        results.put(f"failed: {exc}")


def test_a_child_forked_during_a_write_transaction_can_write(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    store = SqlStore(f"sqlite:///{path}")
    inside, release = threading.Event(), threading.Event()

    def hold_a_write_transaction() -> None:
        with store.database.write() as connection:  # the writes every store verb makes
            connection.exec_driver_sql("SELECT 1")
            inside.set()
            release.wait(10)

    writer = threading.Thread(target=hold_a_write_transaction)
    writer.start()
    try:
        assert inside.wait(10)
        context = multiprocessing.get_context("fork")
        results = context.Queue()
        child = context.Process(target=_write_in_child, args=(str(path), results))
        # The fork waits for the transaction: let it end shortly after the fork began.
        threading.Timer(0.3, release.set).start()
        child.start()
        child.join(30)
        assert results.get(timeout=5) == "written"
    finally:
        release.set()
        writer.join(10)
        store.close()


@pytest.mark.parametrize("suffix", ["", "?mode=ro"])
def test_every_sqlite_connection_opens_under_the_call_gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str) -> None:
    """A child forked while SQLite opens a file would hang in its own first open: forks wait for every open."""
    from partita.store.fork_gate import SQLITE_CALL_GATE

    path = tmp_path / "store.db"
    SqlStore(f"sqlite:///{path}").close()
    real_connect = sqlite3.connect
    gated: list[bool] = []

    def watched(*arguments, **options):  # type: ignore[no-untyped-def]
        gated.append(SQLITE_CALL_GATE._is_owned())  # type: ignore[attr-defined]
        return real_connect(*arguments, **options)

    monkeypatch.setattr(sqlite3, "connect", watched)
    monkeypatch.setattr(sqlite3.dbapi2, "connect", watched)  # what SQLAlchemy's engine calls
    store = SqlStore(f"sqlite:///{path}{suffix}")
    try:
        store.list_runs()  # the engine's pool
        if not suffix:
            with store.database.driver_write() as connection:  # the shared write connection
                connection.exec_driver_sql("SELECT 1")
            store.database.driver_connection().close()
    finally:
        store.close()
    assert gated and all(gated)


def test_children_forked_while_other_threads_read_the_store_can_open_it(tmp_path: Path) -> None:
    """A read runs SQLite outside the interpreter's lock and takes its process-wide memory lock.

    A child forked during one hung in its first SQLite call (7 of 200 in
    this loop before forks waited for reads): forks now wait for them.
    """
    path = tmp_path / "store.db"
    store = SqlStore(f"sqlite:///{path}")

    def read() -> None:
        with store.database.connect() as connection:
            connection.exec_driver_sql("SELECT COUNT(*) FROM partita_runs, partita_runs AS b").fetchall()
        store.database.read("SELECT COUNT(*) FROM partita_events")

    def read_in_child() -> None:
        child = sqlite3.connect(path)
        child.execute("SELECT COUNT(*) FROM partita_runs").fetchall()

    try:
        with running_constantly(read, threads=3):
            hung = hung_children(150, read_in_child)
    finally:
        store.close()
    assert hung == 0
