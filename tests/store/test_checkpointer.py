"""SQLite checkpoints run on a background thread, never lose a commit, and keep the log bounded.

`WalCheckpointer` copies the write-ahead log into the database after this
process's commits; the writers' own checkpoint waits for `WRITER_CHECKPOINT_PAGES` and restarts the log.
These tests use real SQLite files and a real killed process.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sqlite3
import struct
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import partita
from partita.store import checkpointer as checkpointer_module
from partita.store.checkpointer import LOG_FILE_LIMIT, WRITER_CHECKPOINT_PAGES, WalCheckpointer
from partita.store.database import configure_sqlite
from partita.store.fork_gate import SQLITE_CALL_GATE
from partita.store.sql import SqlStore

from .conftest import hung_children, running_constantly


@pytest.fixture(autouse=True)
def _background_checkpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    """The background thread as it runs where SQLite has the WAL-reset fix (this machine's may not).

    Stores opened in another interpreter (the kill test's producer) run
    with this machine's SQLite as it is.
    """
    monkeypatch.setattr(checkpointer_module, "WAL_RESET_FIXED", True)


def _emit(store: SqlStore, count: int, start: int = 0) -> None:
    registry = partita.AssetRegistry()
    keys = partita.StaticPartitionDef("keys", [f"k{index}" for index in range(start, start + count)])

    @partita.asset(partition_def=keys, registry=registry)
    def target() -> None:
        return None

    @partita.asset(registry=registry)
    def producer(context: partita.AssetContext) -> None:
        for index in range(start, start + count):
            context.emit("target", partition_key=f"k{index}", extra={"n": index})

    assert partita.Flow(["producer"], registry=registry, store=store).run().succeeded


def _wait_for(condition, seconds: float = 10.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


def test_commits_are_checkpointed_in_the_background_and_the_log_stays_bounded(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    store = SqlStore(f"sqlite:///{path}")
    try:
        first_salt = _log_salt(path)
        with _PeakLog(path) as peak:
            _emit(store, 3000)  # about 17,000 log pages: eight times the writers' checkpoint
        checkpointer = store.database.checkpointer
        assert checkpointer is not None and checkpointer.checkpoints >= 2
        # The log was copied and restarted along the way, never left to grow far past the writers' checkpoint
        # (about 2,100 pages on this project's machines; a disk slow to sync delays restarts).
        assert (_log_salt(path) - first_salt) % 2**32 >= 4
        assert peak.pages <= 5000  # 20 MB
        assert len(store.list_events(asset="target")) == 3000
    finally:
        store.close()


def _log_salt(path: Path) -> int:
    """The log header's first salt: SQLite adds one to it each time the log starts again, whichever connection."""
    with open(f"{path}-wal", "rb") as log:
        return int(struct.unpack(">I", log.read(20)[16:20])[0])


class _PeakLog:
    """The largest the log file grew, in pages, polled every millisecond on a thread while the block runs.

    A file over `LOG_FILE_LIMIT` is cut back when the log restarts, so a
    short peak between two polls can go unseen: the figure is a lower bound.
    """

    def __init__(self, path: Path) -> None:
        self._path = f"{path}-wal"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch)
        self.pages = 0

    def _watch(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError):
                self.pages = max(self.pages, os.path.getsize(self._path) // (4096 + 24))
            time.sleep(0.001)

    def __enter__(self) -> _PeakLog:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)


def test_a_restarting_log_file_is_cut_back_after_a_large_transaction(tmp_path: Path) -> None:
    """A store connection's settings alone, with no background checkpoint to race the test's own."""
    path = tmp_path / "store.db"
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        configure_sqlite(connection)
        connection.execute("CREATE TABLE large (body BLOB)")
        connection.execute("INSERT INTO large VALUES (?)", (bytes(LOG_FILE_LIMIT + 8_000_000),))
        assert os.path.getsize(f"{path}-wal") > LOG_FILE_LIMIT + 8_000_000
        assert connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[0] == 0
        connection.execute("INSERT INTO large VALUES (x'00')")  # the log restarts here
        assert os.path.getsize(f"{path}-wal") <= LOG_FILE_LIMIT
    finally:
        connection.close()


def test_store_connections_leave_checkpoints_to_the_thread_below_their_own_threshold(tmp_path: Path) -> None:
    store = SqlStore(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        connection = store.database.driver_connection()
        try:
            assert connection.execute("PRAGMA wal_autocheckpoint").fetchone() == (WRITER_CHECKPOINT_PAGES,)
            assert connection.execute("PRAGMA journal_size_limit").fetchone() == (LOG_FILE_LIMIT,)
        finally:
            connection.close()
    finally:
        store.close()


def test_the_thread_exits_when_idle_and_the_next_commit_starts_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checkpointer_module, "IDLE_SECONDS", 0.05)
    path = tmp_path / "store.db"
    store = SqlStore(f"sqlite:///{path}")
    try:
        _emit(store, 50)
        checkpointer = store.database.checkpointer
        assert checkpointer is not None
        assert _wait_for(lambda: checkpointer.checkpoints >= 1 and checkpointer._thread is None)
        first = checkpointer.checkpoints
        _emit(store, 50, start=50)
        assert _wait_for(lambda: checkpointer.checkpoints > first)
    finally:
        store.close()


def test_close_stops_the_thread_and_later_commits_start_none(tmp_path: Path) -> None:
    store = SqlStore(f"sqlite:///{tmp_path / 'store.db'}")
    checkpointer = store.database.checkpointer
    assert checkpointer is not None
    _emit(store, 20)
    store.close()
    assert checkpointer._thread is None
    checkpointer.committed()
    assert checkpointer._thread is None


def test_a_failing_checkpoint_is_swallowed_and_the_writers_go_on(tmp_path: Path) -> None:
    def refuse() -> sqlite3.Connection:
        raise sqlite3.OperationalError("unable to open database file")

    checkpointer = WalCheckpointer(refuse)
    try:
        checkpointer.committed()
        assert _wait_for(lambda: checkpointer._thread is None or not checkpointer._due)
        assert checkpointer.checkpoints == 0
        checkpointer.committed()  # asking again is harmless
    finally:
        checkpointer.close()
    assert checkpointer._thread is None


def test_the_checkpoint_holds_the_fork_gate(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    SqlStore(f"sqlite:///{path}").close()
    owned: list[bool] = []

    class Watched(sqlite3.Connection):
        def execute(self, *arguments, **options):  # type: ignore[no-untyped-def, override]
            owned.append(SQLITE_CALL_GATE._is_owned())  # type: ignore[attr-defined]
            return super().execute(*arguments, **options)

    checkpointer = WalCheckpointer(lambda: sqlite3.connect(path, factory=Watched, check_same_thread=False))
    try:
        checkpointer.committed()
        assert _wait_for(lambda: checkpointer.checkpoints == 1)
    finally:
        checkpointer.close()
    assert owned == [True]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork hooks")
def test_a_fork_waits_for_a_checkpoint_in_progress() -> None:
    holding, forked_at = threading.Event(), []

    def hold() -> None:
        with SQLITE_CALL_GATE:
            holding.set()
            time.sleep(0.3)

    holder = threading.Thread(target=hold)
    holder.start()
    assert holding.wait(5)
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: nothing to do
        os._exit(0)
    forked_at.append(time.monotonic() - started)
    os.waitpid(pid, 0)
    holder.join(5)
    assert forked_at[0] >= 0.2


PRODUCER = """
import sys
import partita
from partita.store import open_store

registry = partita.AssetRegistry()
keys = partita.StaticPartitionDef("keys", [f"k{n}" for n in range(1_000_000)])

@partita.asset(partition_def=keys, registry=registry)
def target():
    return None

@partita.asset(registry=registry)
def producer(context):
    n = 0
    while True:
        receipt = context.emit("target", partition_key=f"k{n}", extra={"n": n})
        sys.stdout.write(f"{receipt.id}\\n")
        sys.stdout.flush()
        n += 1

store = open_store(sys.argv[1])
partita.Flow(["producer"], registry=registry, store=store).run()
"""


def test_every_receipt_survives_a_kill_during_background_checkpoints(tmp_path: Path) -> None:
    """Receipts printed before SIGKILL name committed events, whatever the checkpointer was doing."""
    path = tmp_path / "store.db"
    script = tmp_path / "producer.py"
    script.write_text(textwrap.dedent(PRODUCER))
    process = subprocess.Popen(
        [sys.executable, str(script), f"sqlite:///{path}"], stdout=subprocess.PIPE, text=True, bufsize=1
    )
    receipts: list[int] = []
    try:
        assert process.stdout is not None
        while len(receipts) < 4000:  # about 23,000 log pages: several background checkpoints
            line = process.stdout.readline()
            assert line, "the producer ended before it was killed"
            receipts.append(int(line))
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(30)
    store = SqlStore(f"sqlite:///{path}")
    try:
        stored = {event.id for event in store.list_events(asset="target")}
    finally:
        store.close()
    assert set(receipts) <= stored


def _write_and_checkpoint_in_child(store: SqlStore, results: multiprocessing.Queue) -> None:
    try:
        checkpointer = store.database.checkpointer
        assert checkpointer is not None
        assert checkpointer._thread is None  # the parent's thread did not come along
        before = checkpointer.checkpoints
        _emit(store, 20, start=1000)
        deadline = time.monotonic() + 10
        while checkpointer.checkpoints == before and time.monotonic() < deadline:
            time.sleep(0.01)
        results.put(checkpointer.checkpoints - before)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        results.put(f"{type(exc).__name__}: {exc}")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork")
def test_a_forked_child_checkpoints_on_a_thread_of_its_own(tmp_path: Path) -> None:
    store = SqlStore(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        _emit(store, 20)
        checkpointer = store.database.checkpointer
        assert checkpointer is not None and checkpointer._thread is not None  # alive, idling out
        context = multiprocessing.get_context("fork")
        results = context.Queue()
        child = context.Process(target=_write_and_checkpoint_in_child, args=(store, results))
        child.start()
        outcome = results.get(timeout=30)
        child.join(30)
        assert isinstance(outcome, int) and outcome >= 1, outcome
        _emit(store, 20, start=2000)  # the parent goes on writing and checkpointing
        assert len(store.list_events(asset="target")) == 60
    finally:
        store.close()


def _open_and_write(path: str) -> None:
    connection = sqlite3.connect(path, timeout=5)
    connection.execute("CREATE TABLE IF NOT EXISTS child_writes (n INTEGER)")
    connection.execute("INSERT INTO child_writes VALUES (1)")
    connection.commit()
    connection.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork")
def test_children_forked_while_the_checkpointer_opens_and_closes_connections_can_open_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite takes process-wide locks when it opens or closes a file: a fork must not catch the thread there.

    With no idle time the thread opens a connection, checkpoints, closes it and
    ends after every commit, while this thread forks children that open the file.
    """
    monkeypatch.setattr(checkpointer_module, "IDLE_SECONDS", 0.0)
    monkeypatch.setattr(checkpointer_module, "CHECKPOINT_INTERVAL", 0.0)
    path = tmp_path / "store.db"
    store = SqlStore(f"sqlite:///{path}")

    def commit() -> None:
        with store.database.driver_write() as connection:
            connection.exec_driver_sql("SELECT 1")

    try:
        with running_constantly(commit):
            hung = hung_children(60, lambda: _open_and_write(str(path)))
    finally:
        store.close()
    assert hung == 0
