"""Exactly once (SPEC §12): each (consumer, key, event set) starts at most one run, nothing is lost."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

import partita.automation.evaluation as evaluation
from partita.automation.daemon import TriggerDaemon
from partita.automation.evaluation import TriggerEvaluator, run_request
from partita.entry import load_trigger_flows
from partita.store.schema import trigger_requests
from partita.store.sql import SqlStore
from partita.store.triggers import EventPosition, TriggerStore

from .conftest import publish, runs_per_key, wait_for

KEYS = [f"2024-01-{day:02d}" for day in range(1, 9)]


def _flow(entry: str) -> Any:
    (flow,) = load_trigger_flows(entry)
    return flow


def _claim_the_only_request(evaluator: TriggerEvaluator) -> Any:
    """One daemon's pass up to its claim: evaluate, take the single due request, claim it (``None`` if refused)."""
    evaluator.evaluate()
    (request,) = evaluator.due_requests()
    return evaluator.claim(request)


def test_two_daemons_racing_in_threads_start_one_run_per_key(store_url: str, entry: str) -> None:
    with contextlib.closing(SqlStore(store_url)) as store:
        publish(store, *KEYS)
    flow = _flow(entry)
    stores = [SqlStore(store_url) for _ in range(2)]
    daemons = [TriggerDaemon([flow], s, max_in_flight=2) for s in stores]
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def work(daemon: TriggerDaemon) -> None:
        try:
            barrier.wait()
            daemon.run_once()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(daemon,)) for daemon in daemons]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    try:
        assert errors == []
        assert runs_per_key(stores[0]) == {key: 1 for key in KEYS}
        assert sum(daemon.started_runs for daemon in daemons) == len(KEYS)
    finally:
        for s in stores:
            s.close()


def _cli(*args: str, env: dict[str, str] | None = None, **kwargs: Any) -> Any:
    return subprocess.Popen(
        [sys.executable, "-m", "partita", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        **kwargs,
    )


def test_stale_cursor_read_does_not_start_the_same_event_set_twice(
    store: SqlStore, entry: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    publish(store, "2024-01-01")
    flow = _flow(entry)
    first, second = TriggerEvaluator(flow, store), TriggerEvaluator(flow, store)
    claimed = _claim_the_only_request(first)
    assert claimed is not None
    # The second daemon read the cursor before the first one's pass committed.
    monkeypatch.setattr(second.triggers, "cursor", lambda flow_name: (EventPosition(), None))
    second.evaluate()
    assert second.due_requests() == []
    run_request(first, claimed)
    assert runs_per_key(store) == {"2024-01-01": 1}


def test_two_trigger_once_processes_on_postgresql(postgres_url: str, entry: str) -> None:
    store = SqlStore(postgres_url)
    try:
        publish(store, *KEYS)
        processes = [_cli("trigger", entry, "--once", "--store", postgres_url, "--json") for _ in range(2)]
        outputs = [process.communicate(timeout=60) for process in processes]
        for process, (_out, err) in zip(processes, outputs, strict=True):
            assert process.returncode == 0, err
        started = [json.loads(out)["started_runs"] for out, _ in outputs]
        assert sum(started) == len(KEYS)
        assert runs_per_key(store) == {key: 1 for key in KEYS}
    finally:
        store.close()


def test_stale_claim_is_taken_over_with_same_run_id(store: SqlStore, entry: str, monkeypatch: pytest.MonkeyPatch) -> None:
    publish(store, "2024-01-01")
    flow = _flow(entry)
    dead = TriggerEvaluator(flow, store)
    claimed = _claim_the_only_request(dead)
    assert claimed is not None and claimed.run_id
    # The "daemon" dies here: claimed, run never started. Not stale yet: nobody takes it.
    survivor = TriggerEvaluator(flow, store)
    assert survivor.due_requests() == []
    monkeypatch.setattr(evaluation, "STALE_CLAIM_SECONDS", 0.0)
    (stale,) = survivor.due_requests()
    assert stale.id == claimed.id
    taken = survivor.claim(stale)
    assert taken is not None
    assert taken.run_id == claimed.run_id
    # The dead daemon's own claim is superseded: it cannot claim it again.
    assert dead.claim(stale) is None
    run_request(survivor, taken)
    assert runs_per_key(store) == {"2024-01-01": 1}
    assert [run.header.run_id for run in store.list_runs()] == [claimed.run_id]
    assert survivor.due_requests() == []


def test_stale_claim_via_claimed_at_column(store: SqlStore, entry: str) -> None:
    publish(store, "2024-01-01", "2024-01-02")
    flow = _flow(entry)
    dead = TriggerEvaluator(flow, store)
    dead.evaluate()
    for request in dead.due_requests():
        assert dead.claim(request) is not None
    with store._engine.begin() as connection:  # noqa: SLF001
        connection.execute(update(trigger_requests).values(claimed_at=time.time() - evaluation.STALE_CLAIM_SECONDS - 5))
    daemon = TriggerDaemon([flow], store)
    assert daemon.run_once() == 2
    assert runs_per_key(store) == {"2024-01-01": 1, "2024-01-02": 1}
    assert TriggerDaemon([flow], store).run_once() == 0


def test_started_run_is_never_started_again(store: SqlStore, entry: str, monkeypatch: pytest.MonkeyPatch) -> None:
    publish(store, "2024-01-01")
    flow = _flow(entry)
    evaluator = TriggerEvaluator(flow, store)
    claimed = _claim_the_only_request(evaluator)
    assert claimed is not None
    run_request(evaluator, claimed)
    # Simulate a daemon killed after the run finished but before the request was marked finished.
    with store._engine.begin() as connection:  # noqa: SLF001
        connection.execute(update(trigger_requests).values(status="claimed", claimed_at=0.0, finished_at=None))
    monkeypatch.setattr(evaluation, "STALE_CLAIM_SECONDS", 0.0)
    assert evaluator.due_requests() == []
    assert TriggerDaemon([flow], store).run_once() == 0
    assert runs_per_key(store) == {"2024-01-01": 1}


def test_nothing_pending_is_lost_across_restart(store: SqlStore, entry: str) -> None:
    publish(store, "2024-01-01", "2024-01-02")
    flow = _flow(entry)
    # First "daemon" records the pass (cursor advanced, requests open), then dies.
    TriggerEvaluator(flow, store).evaluate()
    assert TriggerStore(store).cursor("consumer_flow")[0].event_id > 0
    publish(store, "2024-01-03")
    restarted = TriggerDaemon([flow], store)
    assert restarted.run_once() == 3
    assert runs_per_key(store) == {"2024-01-01": 1, "2024-01-02": 1, "2024-01-03": 1}


def test_serve_killed_with_sigkill_then_restarted(tmp_path: Path, entry: str) -> None:
    url = f"sqlite:///{tmp_path}/kill.db"
    store = SqlStore(url)
    try:
        publish(store, *KEYS)
        env = {"CONSUMER_DELAY": "0.3"}
        first = _cli("serve", entry, "--store", url, "--max-in-flight", "2", env=env)
        try:
            wait_for(lambda: len(store.list_runs(limit=100)) >= 1, timeout=30)
        finally:
            first.send_signal(signal.SIGKILL)
            first.communicate(timeout=30)
        assert first.returncode == -signal.SIGKILL
        assert len(runs_per_key(store)) < len(KEYS)
        # Time passes: claims of the killed daemon whose run never started go stale.
        with store._engine.begin() as connection:  # noqa: SLF001
            connection.execute(
                update(trigger_requests)
                .where(trigger_requests.c.status == "claimed")
                .values(claimed_at=time.time() - evaluation.STALE_CLAIM_SECONDS - 5)
            )
        second = _cli("serve", entry, "--store", url, env={"CONSUMER_DELAY": "0"})
        try:
            wait_for(lambda: _open_requests(store) == 0, timeout=30)
            # Let it do a few more passes: nothing else may start.
            deadline = time.monotonic() + 0.5
            while time.monotonic() < deadline:
                assert set(_successes_per_key(store).values()) == {1}
                time.sleep(0.05)
        finally:
            second.send_signal(signal.SIGTERM)
            _, err = second.communicate(timeout=30)
        assert second.returncode == 0, err
        # Every key ends in exactly one successful run; each run the kill cut short got exactly one follow-up.
        assert _successes_per_key(store) == {key: 1 for key in KEYS}
        interrupted = [run.run_id for run in store.list_runs(limit=100) if run.status == "interrupted"]
        follows = [TriggerStore(store).launch(run.run_id) for run in store.list_runs(limit=100)]
        assert sorted(launch.follows_run_id for launch in follows if launch.follows_run_id) == sorted(interrupted)
        assert len(store.list_runs(limit=100)) == len(KEYS) + len(interrupted)
    finally:
        store.close()


def _open_requests(store: SqlStore) -> int:
    triggers = TriggerStore(store)
    return len(triggers.requests("consumer_flow", ("pending", "claimed")))


def _successes_per_key(store: SqlStore) -> dict[str, int]:
    """Successful consumer attempts per key, over every run."""
    with store._engine.connect() as connection:  # noqa: SLF001
        rows = connection.exec_driver_sql(
            "SELECT partition_key, count(*) FROM partita_attempts WHERE asset = 'consumer' AND status = 'success' "
            "GROUP BY partition_key"
        )
        return {key: count for key, count in rows}
