"""`HostWriteLock`: on a SQLite with the WAL-reset bug, partita processes write one store one at a time."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import partita
from partita.store import checkpointer as checkpointer_module
from partita.store.fork_gate import sqlite_write
from partita.store.host_lock import HostWriteLock, lock_file_of
from partita.store.sql import SqlStore

HOLD = """
import fcntl, sys, time
with open(sys.argv[1], "a") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


@pytest.fixture(autouse=True)
def _with_the_bug(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stores opened here take the lock, whatever this machine's SQLite."""
    monkeypatch.setattr(checkpointer_module, "WAL_RESET_FIXED", False)


def _hold_elsewhere(path: str, seconds: float) -> subprocess.Popen[str]:
    holder = subprocess.Popen([sys.executable, "-c", HOLD, path, str(seconds)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


def _emit(store: SqlStore, key: str) -> None:
    registry = partita.AssetRegistry()

    @partita.asset(partition_def=partita.StaticPartitionDef("keys", [key]), registry=registry)
    def target() -> None:
        return None

    partita.publish_event(store, registry, "target", partition_key=key)


def test_a_store_with_the_bug_writes_under_the_lock_file_and_a_fixed_one_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with contextlib.closing(SqlStore(f"sqlite:///{tmp_path / 'bug.db'}")) as store:
        assert isinstance(store.database.host_lock, HostWriteLock)
        _emit(store, "a")
    assert Path(lock_file_of(str(tmp_path / "bug.db"))).exists()
    monkeypatch.setattr(checkpointer_module, "WAL_RESET_FIXED", True)
    with contextlib.closing(SqlStore(f"sqlite:///{tmp_path / 'fixed.db'}")) as store:
        assert not isinstance(store.database.host_lock, HostWriteLock)
        _emit(store, "a")
    assert not Path(lock_file_of(str(tmp_path / "fixed.db"))).exists()


def test_a_write_waits_while_another_process_holds_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    with contextlib.closing(SqlStore(f"sqlite:///{path}")) as store:
        holder = _hold_elsewhere(lock_file_of(str(path)), 1.0)
        began = time.monotonic()
        _emit(store, "a")  # committed once the other process let go
        waited = time.monotonic() - began
        holder.wait(10)
        assert waited >= 0.5
        assert [event.partition_key for event in store.list_events(asset="target")] == ["a"]


def test_a_lock_held_past_the_timeout_fails_as_a_locked_database(tmp_path: Path) -> None:
    lock = HostWriteLock(str(tmp_path / "store.db"), timeout=0.2)
    holder = _hold_elsewhere(lock_file_of(str(tmp_path / "store.db")), 3.0)
    try:
        began = time.monotonic()
        with pytest.raises(sqlite3.OperationalError, match="database is locked"), lock:
            pass
        assert 0.2 <= time.monotonic() - began < 2.0
        with pytest.raises(sqlite3.OperationalError):  # still refused: nothing was left held
            with lock:
                pass
    finally:
        holder.kill()
        holder.wait(10)
    with lock:  # the holder is gone: taken at once
        with lock:  # re-entrant
            pass
    lock.close()


def _take_in_child(path: str, results: multiprocessing.Queue) -> None:
    lock = _PARENT_LOCK
    assert lock is not None
    try:
        with lock:
            results.put("taken")
    except sqlite3.OperationalError as exc:
        results.put(str(exc))


_PARENT_LOCK: HostWriteLock | None = None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork")
def test_a_forked_child_does_not_share_the_parents_hold(tmp_path: Path) -> None:
    """A flock belongs to the open file: a child using the parent's descriptor would pass as the holder."""
    global _PARENT_LOCK
    path = str(tmp_path / "store.db")
    _PARENT_LOCK = lock = HostWriteLock(path, timeout=0.3)
    try:
        results: multiprocessing.Queue = multiprocessing.get_context("fork").Queue()
        with lock:  # held by the parent, outside the write gate: a fork may happen
            child = multiprocessing.get_context("fork").Process(target=_take_in_child, args=(path, results))
            child.start()
            assert results.get(timeout=30) == "database is locked"
            child.join(30)
        child = multiprocessing.get_context("fork").Process(target=_take_in_child, args=(path, results))
        child.start()
        assert results.get(timeout=30) == "taken"
        child.join(30)
    finally:
        _PARENT_LOCK = None
        lock.close()


def test_closing_the_store_closes_the_lock_file(tmp_path: Path) -> None:
    store = SqlStore(f"sqlite:///{tmp_path / 'store.db'}")
    _emit(store, "a")
    lock = store.database.host_lock
    assert isinstance(lock, HostWriteLock) and lock._descriptor >= 0  # noqa: SLF001 - opened by the write
    descriptor = lock._descriptor  # noqa: SLF001
    store.close()
    with pytest.raises(OSError):
        os.fstat(descriptor)
    with sqlite_write():
        pass  # the gate is free: close took it and let go


def test_closing_while_held_keeps_the_hold_until_its_writer_lets_go(tmp_path: Path) -> None:
    lock = HostWriteLock(str(tmp_path / "store.db"), timeout=0.2)
    with lock:
        lock.close()  # a store closed inside its own write: nothing is let go under the writer
        holder = subprocess.run(
            [sys.executable, "-c", "import fcntl,sys\nf=open(sys.argv[1],'a')\nfcntl.flock(f,fcntl.LOCK_EX|fcntl.LOCK_NB)",
             lock_file_of(str(tmp_path / "store.db"))],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert holder.returncode != 0 and "BlockingIOError" in holder.stderr
    lock.close()
