"""Reads of one key's history (the UI's key page), and the daemons and request counts the overview shows.

On SQLite and PostgreSQL: a key's attempts come unfinished first, then
newest finished first, and a dead owner's running attempt reads interrupted.
"""

from __future__ import annotations

import time

from partita.results.attempts import FailureInfo
from partita.results.record import AttemptRecord
from partita.store.key_history import KeyHistory
from partita.store.triggers import TriggerStore

from .conftest import NOW, dead_pid, finish_run, keyed_plan_document, start_run

KEYS = ["a", "b", "c", "d"]
PLAN = keyed_plan_document(KEYS)


def _attempt(index: int, key: str, status: str, finished: float | None) -> AttemptRecord:
    return AttemptRecord(
        "load", index, True, status, partition_key=key, started_at=None if finished is None else finished - 1.0,
        finished_at=finished, duration=0.0 if finished is None else 1.0,
        failure=FailureInfo("builtins.RuntimeError", "source unavailable", "") if status == "failed" else None,
    )  # fmt: skip


def _run(history, run_id: str, attempts: list[AttemptRecord], *, status: str | None = "failed", **owner) -> None:
    start_run(history, run_id, NOW, plan=PLAN, record_partition_keys=True, **owner)
    history.record_progress(attempts, run_id, new=True)
    if status is not None:
        finish_run(history, run_id, status, NOW)


def test_a_keys_attempts_come_unfinished_first_then_newest_first_with_a_cursor(store, run_history):
    _run(run_history, "r1" * 16, [_attempt(0, "a", "failed", 100.0), _attempt(1, "b", "success", 100.0)])
    _run(run_history, "r2" * 16, [_attempt(0, "a", "success", 300.0)])
    _run(run_history, "r3" * 16, [_attempt(0, "a", "failed", 200.0)])
    _run(run_history, "r4" * 16, [_attempt(0, "a", "running", None)], status=None)
    _run(run_history, "r5" * 16, [_attempt(0, "a", "running", None)], status=None, pid=dead_pid())
    history = KeyHistory(store)

    found = history.attempts("load", "a", limit=10)

    assert [(row.run_id[:2], row.status) for row in found] == [
        ("r5", "interrupted"), ("r4", "running"), ("r2", "success"), ("r3", "failed"), ("r1", "failed"),
    ]  # fmt: skip
    assert found[-1].failure_message == "source unavailable" and found[-1].run_status == "failed"
    page = history.attempts("load", "a", limit=2, before=300.0)
    assert [row.run_id[:2] for row in page] == ["r3", "r1"]
    assert history.attempts("load", "z", limit=10) == []


def test_daemons_come_newest_heartbeat_first_and_requests_are_counted(trigger_state: TriggerStore):
    now = time.time()
    trigger_state.daemon_started("old", "host-a", 1, now - 100)
    trigger_state.daemon_started("new", "host-b", 2, now)
    trigger_state.daemon_heartbeat("old", now - 50, stopped=True)

    daemons = trigger_state.daemons(limit=5)

    assert [(daemon.daemon_id, daemon.stopped_at is None) for daemon in daemons] == [("new", True), ("old", False)]
    assert trigger_state.daemons(limit=1)[0].daemon_id == "new"
    assert trigger_state.request_counts("never") == {} and trigger_state.waiting_count("never") == 0


