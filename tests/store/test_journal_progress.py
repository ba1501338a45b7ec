"""What the store shows of a run while it runs (`partita.store.journal`).

The journal gets no start event per attempt: each periodic write asks the
run which attempts are in flight and records those it has not recorded yet
as running. These tests hold that an attempt whose body runs is visible as
running, with its start time; that one waiting for a retry is visible as
running with the invocation that failed; and that the end leaves every
attempt terminal, each written once as a new row or as an update.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from typing import Any

import partita as p
from partita.store.sql import SqlStore

WAIT = 30.0


def _attempts(store: SqlStore, run_id: str) -> dict[tuple[str, int], Any]:
    return {(attempt.asset, attempt.index): attempt for task in store.get_tasks(run_id) for attempt in task.attempts}


def _until(condition: Any) -> Any:
    deadline = time.monotonic() + WAIT
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _with_invocations(attempt: Any) -> Any:
    """The stored attempt once it has an invocation recorded, else None."""
    return attempt if attempt is not None and attempt.invocations else None


def _run_in_background(flow: p.Flow, config: Any) -> tuple[threading.Thread, list[p.RunResult]]:
    results: list[p.RunResult] = []
    thread = threading.Thread(target=lambda: results.append(flow.run(config)))
    thread.start()
    return thread, results


def test_an_attempt_whose_body_runs_is_recorded_running_with_its_start(store: SqlStore) -> None:
    registry = p.AssetRegistry()
    release, started = threading.Event(), {}

    @p.asset(partition_def=p.DatePartitionDef(), registry=registry)
    def slow(context: p.AssetContext) -> None:
        started[context.partition_key] = time.time()
        if context.partition_key.day == 2:
            assert release.wait(WAIT)

    keys = [dt.date(2026, 1, day) for day in (1, 2, 3)]
    flow = p.Flow(["slow"], registry=registry, store=store, max_concurrency=3, record_partition_keys=True)
    thread, results = _run_in_background(flow, {"partition_keys": keys})
    try:
        run_id = _until(lambda: [run.run_id for run in store.list_runs(limit=1)])[0]
        held = _until(lambda: _attempts(store, run_id).get(("slow", 1)) or None)
        assert held.status == "running" and held.partition_key == "2026-01-02"
        assert held.started_at is not None and abs(held.started_at - started[keys[1]]) < 1.0
        _until(lambda: {a.status for k, a in _attempts(store, run_id).items() if k[1] != 1} == {"success"})
    finally:
        release.set()
        thread.join(WAIT)
    assert results[0].succeeded
    attempts = _attempts(store, run_id)
    assert [attempts[("slow", index)].status for index in range(3)] == ["success"] * 3
    assert len(attempts) == 3  # the running row became the success: no second row


def test_an_attempt_waiting_for_its_retry_and_then_retrying_is_recorded_running_with_each_start(
    store: SqlStore,
) -> None:
    registry = p.AssetRegistry()
    calls, release = [], threading.Event()

    @p.asset(registry=registry, retry=p.RetryPolicy(max_attempts=2, delay=1.0))
    def flaky() -> None:
        calls.append(time.time())
        if len(calls) == 1:
            raise RuntimeError("transient")
        assert release.wait(WAIT)

    flow = p.Flow(["flaky"], registry=registry, store=store)
    thread, results = _run_in_background(flow, None)
    try:
        run_id = _until(lambda: [run.run_id for run in store.list_runs(limit=1)])[0]
        # A flush may catch the first invocation still running (a row without invocations); the
        # retry waits a second, so a later flush sees it waiting with the invocation that failed.
        waiting = _until(lambda: _with_invocations(_attempts(store, run_id).get(("flaky", 0))))
        assert len(calls) == 1
        assert waiting.status == "running"
        assert [(i.number, i.succeeded, i.failure_type) for i in waiting.invocations] == [
            (1, False, "builtins.RuntimeError")
        ]
        # The second invocation runs (held): the row shows when it began, and still the failed one.
        retrying = _until(lambda: len(calls) == 2 and (_attempts(store, run_id)[("flaky", 0)].started_at or None))
        assert abs(retrying - calls[1]) < 1.0
        assert [i.number for i in _attempts(store, run_id)[("flaky", 0)].invocations] == [1]
    finally:
        release.set()
        thread.join(WAIT)
    assert results[0].succeeded
    finished = _attempts(store, run_id)[("flaky", 0)]
    assert finished.status == "success"
    assert [(i.number, i.succeeded) for i in finished.invocations] == [(1, False), (2, True)]


def test_observers_still_see_every_start_while_the_journal_reads_the_attempts_in_flight(store: SqlStore) -> None:
    registry = p.AssetRegistry()

    @p.asset(partition_def=p.DatePartitionDef(), registry=registry)
    def quick() -> None:
        """Starts and finishes between two writes."""

    seen: list[type] = []
    keys = [dt.date(2026, 2, 1) + dt.timedelta(days=offset) for offset in range(200)]
    result = p.Flow(["quick"], registry=registry, store=store).run(
        {"partition_keys": keys}, observers=[type("Seen", (), {"on_event": lambda self, e: seen.append(type(e))})()]
    )
    assert result.succeeded
    assert seen.count(p.AttemptStarted) == seen.count(p.AttemptFinished) == len(keys)
    attempts = _attempts(store, result.run_id)
    assert len(attempts) == len(keys) and {a.status for a in attempts.values()} == {"success"}


def test_a_body_the_cancellation_cut_short_is_recorded_once_as_cancelled(store: SqlStore) -> None:
    """Its attempt ends at the cancellation while the body runs on: no later write records it running again.

    An observer holds the loop right after the cancelled attempts' ends, so
    the journal writes them before the run's own end writes; the bodies are
    still in flight then.
    """
    registry = p.AssetRegistry()
    release, started = threading.Event(), threading.Event()

    @p.asset(partition_def=p.StaticPartitionDef("shards", ["a", "b"]), registry=registry)
    def stubborn() -> None:
        started.set()
        release.wait(WAIT)  # outlives the grace period

    class SlowAfterCancelled:
        def on_event(self, event: Any) -> None:
            if isinstance(event, p.AttemptFinished) and event.attempt.status is p.AttemptStatus.CANCELLED:
                time.sleep(0.3)  # several of the journal's writes happen meanwhile

    flow = p.Flow(["stubborn"], registry=registry, store=store, max_concurrency=2, cancel_grace_seconds=0.2)
    results: list[Any] = []

    def run() -> None:
        try:
            results.append(flow.run({"partition_keys": ["a", "b"]}, observers=[SlowAfterCancelled()]))
        except BaseException as exc:  # noqa: BLE001 - reported below
            results.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        assert started.wait(WAIT)
        run_id = _until(lambda: [run.run_id for run in store.list_runs(limit=1)])[0]
        assert p.cancel_run(run_id, store=store).outcome is p.CancelOutcome.REQUESTED
        thread.join(WAIT)
    finally:
        release.set()
        thread.join(WAIT)
    assert isinstance(results[0], p.RunResult), results[0]  # not a StoreError at the run's end
    assert results[0].status is p.RunStatus.CANCELLED
    assert store.get_run(run_id).status == "cancelled"
    assert {a.status for a in _attempts(store, run_id).values()} == {"cancelled"}


def test_a_failing_list_of_attempts_in_flight_loses_no_attempt(store: SqlStore, monkeypatch: Any) -> None:
    """The list only shows progress: a write goes on without it and keeps the ends it took."""
    from partita.execution import engine

    def broken(self: Any) -> list[Any]:
        raise RuntimeError("cannot list")

    monkeypatch.setattr(engine._Run, "running_attempts", broken)
    registry = p.AssetRegistry()

    @p.asset(partition_def=p.DatePartitionDef(), registry=registry)
    def steady() -> None:
        time.sleep(0.001)

    keys = [dt.date(2026, 3, 1) + dt.timedelta(days=offset) for offset in range(100)]
    result = p.Flow(["steady"], registry=registry, store=store).run({"partition_keys": keys})
    assert result.succeeded
    attempts = _attempts(store, result.run_id)
    assert len(attempts) == len(keys) and {a.status for a in attempts.values()} == {"success"}
