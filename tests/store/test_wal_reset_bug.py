"""SQLite's WAL-reset bug: no background checkpoints where the runtime SQLite has it.

Before 3.51.3 a checkpoint that races a commit restarting the log can make
a later checkpoint skip part of a transaction: the file then loses pages its
indexes still point to. A two-process benchmark run (a producer and the
trigger daemon on one store, with background checkpoints every few
milliseconds in both) left such a store: ``PRAGMA integrity_check`` found
rows missing from the events' indexes, and the daemon never saw the events
behind them.
"""

from __future__ import annotations

import multiprocessing
import sqlite3
import threading
from pathlib import Path

import pytest

import partita
from partita.store import checkpointer as checkpointer_module
from partita.store.checkpointer import wal_reset_fixed
from partita.store.sql import SqlStore

from .test_checkpointer import _emit, _log_salt, _PeakLog


@pytest.mark.parametrize(
    ("version", "fixed"),
    [
        ((3, 40, 1), False),  # Debian 12
        ((3, 44, 5), False),
        ((3, 44, 6), True),  # the fix, backported
        ((3, 45, 0), False),
        ((3, 50, 6), False),
        ((3, 50, 7), True),  # the fix, backported
        ((3, 51, 0), False),
        ((3, 51, 2), False),
        ((3, 51, 3), True),  # the release with the fix
        ((3, 53, 4), True),
    ],
)
def test_which_sqlite_versions_have_the_fix(version: tuple[int, int, int], fixed: bool) -> None:
    assert wal_reset_fixed(version) is fixed


def _integrity(path: Path) -> list[tuple[str]]:
    connection = sqlite3.connect(path)
    try:
        return connection.execute("PRAGMA integrity_check").fetchall()
    finally:
        connection.close()


def test_a_sqlite_with_the_bug_gets_no_background_checkpoints_and_the_log_still_restarts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checkpointer_module, "WAL_RESET_FIXED", False)
    path = tmp_path / "store.db"
    store = SqlStore(f"sqlite:///{path}")
    try:
        assert store.database.checkpointer is None
        first_salt = _log_salt(path)
        with _PeakLog(path) as peak:
            _emit(store, 3000)  # about 17,000 log pages: eight times the writers' checkpoint
        assert not [thread for thread in threading.enumerate() if thread.name == "partita-wal-checkpoint"]
        # The writers' own checkpoints copied and restarted the log along the way.
        assert (_log_salt(path) - first_salt) % 2**32 >= 4
        assert peak.pages <= 5000
        assert len(store.list_events(asset="target")) == 3000
    finally:
        store.close()
    assert _integrity(path) == [("ok",)]


def _emit_from_process(url: str, first: int, count: int, receipts: multiprocessing.Queue) -> None:
    registry = partita.AssetRegistry()
    keys = partita.StaticPartitionDef("keys", [f"k{index}" for index in range(first, first + count)])

    @partita.asset(partition_def=keys, registry=registry)
    def target() -> None:
        return None

    @partita.asset(registry=registry)
    def producer(context: partita.AssetContext) -> list[int]:
        return [context.emit("target", partition_key=key).id for key in keys.keys]

    store = partita.open_store(url)
    try:
        result = partita.Flow(["producer"], registry=registry, store=store).run()
        receipts.put(result.output("producer") if result.succeeded else f"failed: {result.status.value}")
    finally:
        store.close()


def test_two_processes_emitting_into_one_store_at_once_leave_it_whole(tmp_path: Path) -> None:
    """Each process commits event by event, as this machine's SQLite allows; every receipt stays, intact."""
    path = tmp_path / "store.db"
    url = f"sqlite:///{path}"
    partita.open_store(url).close()
    context = multiprocessing.get_context("spawn")
    receipts = context.Queue()
    processes = [context.Process(target=_emit_from_process, args=(url, first, 2500, receipts)) for first in (0, 2500)]
    for process in processes:
        process.start()
    reported = [receipts.get(timeout=120) for _ in processes]
    for process in processes:
        process.join(60)
        assert process.exitcode == 0
    assert all(isinstance(ids, list) for ids in reported), reported
    store = SqlStore(url)
    try:
        stored = {event.id: event.partition_key for event in store.list_events(asset="target")}
    finally:
        store.close()
    assert {event_id for ids in reported for event_id in ids} == set(stored)
    assert sorted(stored.values()) == sorted(f"k{index}" for index in range(5000))
    assert _integrity(path) == [("ok",)]


def test_only_a_sqlite_store_on_a_sqlite_with_the_bug_gets_a_caution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkpointer_module, "WAL_RESET_FIXED", False)
    caution = checkpointer_module.wal_reset_caution("sqlite")
    assert caution is not None and sqlite3.sqlite_version in caution and "3.51.3" in caution
    assert checkpointer_module.wal_reset_caution("postgresql") is None
    monkeypatch.setattr(checkpointer_module, "WAL_RESET_FIXED", True)
    assert checkpointer_module.wal_reset_caution("sqlite") is None
