"""Every satisfied trigger ends in a finished run (SPEC §12): refused starts and crashed runs are tried again.

- A consumer run whose start the store refuses (locked, connection lost)
  leaves its request pending; a later pass starts it after a backoff.
- A consumer run cut short by a crash gets a follow-up run for the same
  request, up to the trigger's ``rerun_interrupted``; each follow-up starts
  once, even with two daemons.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import select, update

from partita import CronPartitions, OnAssetEvents
from partita.automation.daemon import TriggerDaemon
from partita.automation.evaluation import TriggerEvaluator, run_request
from partita.cli.automation import pending_document
from partita.cli.main import cli
from partita.entry import load_trigger_flows
from partita.errors import DefinitionError, StoreError
from partita.store.schema import trigger_requests
from partita.store.sql import SqlStore
from partita.store.triggers import TriggerStore

from .conftest import ENTRY, publish, runs_per_key, wait_for


def _flow(entry: str) -> Any:
    (flow,) = load_trigger_flows(entry)
    return flow


def _refuse_starts(monkeypatch: pytest.MonkeyPatch, times: int | None) -> list[int]:
    """Make the store refuse the next ``times`` run starts (every start with None), as a locked database does."""
    refused: list[int] = []
    original = SqlStore.record_run_started

    def record_run_started(self: SqlStore, run: Any) -> None:
        if times is None or len(refused) < times:
            refused.append(1)
            raise StoreError(f"store {self.url}: cannot record the run's start: database is locked")
        original(self, run)

    monkeypatch.setattr(SqlStore, "record_run_started", record_run_started)
    return refused


def _requests(store: SqlStore) -> list[Any]:
    return TriggerStore(store).requests("consumer_flow", ("pending", "claimed", "finished", "abandoned"))


def test_a_refused_start_leaves_the_request_pending_and_a_later_pass_starts_it(
    store: SqlStore, entry: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    publish(store, "2024-01-01")
    _refuse_starts(monkeypatch, times=1)
    daemon = TriggerDaemon([_flow(entry)], store)
    assert daemon.run_once() == 0
    assert daemon.unstarted_runs == 1
    (request,) = _requests(store)
    assert request.status == "pending" and request.run_id is None and request.tries == 0
    assert request.start_failures == 1 and "database is locked" in (request.last_error or "")
    assert request.not_before is not None and request.not_before > time.time()
    assert store.list_runs() == []
    # Backing off: a pass right away does not try again.
    assert TriggerDaemon([_flow(entry)], store).run_once() == 0
    with store._engine.begin() as connection:  # noqa: SLF001 - the backoff has passed
        connection.execute(update(trigger_requests).values(not_before=time.time() - 1))
    assert TriggerDaemon([_flow(entry)], store).run_once() == 1
    assert runs_per_key(store) == {"2024-01-01": 1}
    (request,) = _requests(store)
    assert request.status == "finished" and request.tries == 1 and request.start_failures == 0


def test_refused_starts_back_off_longer_each_time(
    store: SqlStore, entry: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    publish(store, "2024-01-01")
    _refuse_starts(monkeypatch, times=None)
    delays = []
    for _ in range(3):
        before = time.time()
        TriggerDaemon([_flow(entry)], store).run_once()
        (request,) = _requests(store)
        delays.append(round(request.not_before - before))
        with store._engine.begin() as connection:  # noqa: SLF001
            connection.execute(update(trigger_requests).values(not_before=time.time() - 1))
    assert delays == [1, 2, 4]
    assert request.start_failures == 3 and store.list_runs() == []


def test_trigger_once_reports_a_refused_start_and_exits_4(
    store_url: str, entry: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with closing(SqlStore(store_url)) as seeded:
        publish(seeded, "2024-01-01")
    _refuse_starts(monkeypatch, times=None)
    text = CliRunner().invoke(cli, ["trigger", entry, "--once", "--store", store_url])
    assert text.exit_code == 4
    assert "started 0 consumer runs" in text.stdout
    assert "could not start" in text.stderr and "Traceback" not in text.output
    with closing(SqlStore(store_url)) as store, store._engine.begin() as connection:  # noqa: SLF001 - backoff passed
        connection.execute(update(trigger_requests).values(not_before=time.time() - 1))
    document = CliRunner().invoke(cli, ["trigger", entry, "--once", "--store", store_url, "--json"])
    assert document.exit_code == 4
    parsed = json.loads(document.stdout)  # exactly one document on stdout
    assert (parsed["started_runs"], parsed["unstarted_runs"]) == (0, 1)


def test_plan_pending_shows_a_refused_start_as_retrying(
    store_url: str, entry: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with closing(SqlStore(store_url)) as store:
        publish(store, "2024-01-01")
        _refuse_starts(monkeypatch, times=1)
        TriggerDaemon([_flow(entry)], store).run_once()
    (flow,) = pending_document(entry, store_url)["flows"]
    (retrying,) = flow["retrying"]
    assert retrying["partition_key"] == "2024-01-01" and retrying["start_failures"] == 1
    assert "database is locked" in retrying["error"]
    assert flow["would_start"] == []


# -- consumer runs cut short by a crash -------------------------------------------------------


def _kill_during_the_run(entry: str, url: str, store: SqlStore) -> str:
    """``partita trigger --once`` whose consumer body blocks, SIGKILLed once its run is recorded: the run id."""
    process = subprocess.Popen(
        [sys.executable, "-m", "partita", "trigger", entry, "--once", "--store", url],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "CONSUMER_DELAY": "60"},
    )
    try:
        runs = wait_for(lambda: store.list_runs(), timeout=60)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    (run,) = runs
    wait_for(lambda: store.get_run(run.run_id).status == "interrupted", timeout=30)
    return run.run_id


def test_a_consumer_run_cut_short_by_a_crash_gets_one_follow_up(store_url: str, entry: str) -> None:
    with closing(SqlStore(store_url)) as store:
        publish(store, "2024-01-01")
        killed = _kill_during_the_run(entry, store_url, store)
        (flow,) = pending_document(entry, store_url)["flows"]
        assert flow["follow_ups"] == [{"partition_key": "2024-01-01", "interrupted_run": killed, "try": 2}]
        assert flow["would_start"] == ["2024-01-01"]

        assert TriggerDaemon([_flow(entry)], store).run_once() == 1
        follow_up = next(run for run in store.list_runs() if run.run_id != killed)
        assert follow_up.status == "success"
        launch = TriggerStore(store).launch(follow_up.run_id)
        assert (launch.attempt, launch.follows_run_id) == (2, killed)
        (request,) = _requests(store)
        assert request.status == "finished" and request.tries == 2 and request.run_id == follow_up.run_id
        # Exactly once: later passes start nothing more.
        assert TriggerDaemon([_flow(entry)], store).run_once() == 0
        assert len(store.list_runs()) == 2

    shown = CliRunner().invoke(cli, ["runs", "show", follow_up.run_id, "--store", store_url, "--json"])
    assert json.loads(shown.stdout)["launch"] == {
        "kind": "trigger", "flow": "consumer_flow", "request": request.id, "try": 2, "follows_run_id": killed,
    }  # fmt: skip
    text = CliRunner().invoke(cli, ["runs", "show", follow_up.run_id, "--store", store_url])
    assert f"try 2, follows interrupted run {killed}" in text.stdout


def test_two_daemons_start_one_follow_up(store_url: str, entry: str) -> None:
    with closing(SqlStore(store_url)) as store:
        publish(store, "2024-01-01")
        _kill_during_the_run(entry, store_url, store)
        first, second = TriggerEvaluator(_flow(entry), store), TriggerEvaluator(_flow(entry), store)
        (due_first,), (due_second,) = first.due_requests(), second.due_requests()
        assert due_first.interrupted and due_second.interrupted
        assert first.claim(due_first) is not None
        assert second.claim(due_second) is None


NO_RERUN_ENTRY = ENTRY.replace('trigger=OnAssetEvents(["raw"])', 'trigger=OnAssetEvents(["raw"], rerun_interrupted=0)')


def test_follow_ups_are_bounded_and_an_exhausted_request_is_shown_abandoned(store_url: str, tmp_path: Path) -> None:
    entry = tmp_path / "no_rerun.py"
    entry.write_text(NO_RERUN_ENTRY)
    with closing(SqlStore(store_url)) as store:
        publish(store, "2024-01-01")
        killed = _kill_during_the_run(str(entry), store_url, store)
        assert TriggerDaemon([_flow(str(entry))], store).run_once() == 0
        (request,) = _requests(store)
        assert request.status == "abandoned" and killed in (request.last_error or "")
    (flow,) = pending_document(str(entry), store_url)["flows"]
    assert flow["would_start"] == [] and flow["follow_ups"] == []
    (abandoned,) = flow["abandoned"]
    assert abandoned["partition_key"] == "2024-01-01" and "interrupted" in abandoned["error"]


def test_an_interrupted_run_whose_attempts_all_succeeded_is_not_run_again(store: SqlStore, entry: str) -> None:
    """Only the run's end was lost (the daemon died after its last attempt was recorded): the work is done."""
    publish(store, "2024-01-01")
    evaluator = TriggerEvaluator(_flow(entry), store)
    evaluator.evaluate()
    (request,) = evaluator.due_requests()
    claimed = evaluator.claim(request)
    assert claimed is not None
    run_request(evaluator, claimed)
    with store._engine.begin() as connection:  # noqa: SLF001 - as if its end never landed and its owner died
        connection.exec_driver_sql(
            "UPDATE partita_runs SET status = 'running', finished_at = NULL, owner_pid = 999999999"
        )
        connection.execute(update(trigger_requests).values(status="claimed", finished_at=None))
    assert store.get_run(claimed.run_id).status == "interrupted"
    assert TriggerDaemon([_flow(entry)], store).run_once() == 0
    (request,) = _requests(store)
    assert request.status == "finished" and len(store.list_runs()) == 1


def test_a_consumer_run_finishes_its_request_in_the_transaction_that_records_its_end(store: SqlStore, entry: str) -> None:
    publish(store, "2024-01-01")
    assert TriggerDaemon([_flow(entry)], store).run_once() == 1
    (request,) = _requests(store)
    (run,) = store.list_runs()
    assert request.status == "finished" and request.run_id == run.header.run_id
    assert run.header.finished_at is not None
    with store._engine.begin() as connection:  # noqa: SLF001 - the row's own finish time
        (finished_at,) = connection.execute(select(trigger_requests.c.finished_at)).one()
    assert finished_at == run.header.finished_at.timestamp()  # one write: the same instant


def test_a_run_end_the_store_refuses_leaves_its_request_claimed_with_the_run_unfinished(
    store: SqlStore, entry: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing half-written: neither the run's end nor its request's finish landed."""
    publish(store, "2024-01-01")

    def refused(self: SqlStore, end: Any, progress: Any = ()) -> None:
        raise StoreError(f"store {self.url}: cannot record the run's end: database is locked")

    monkeypatch.setattr(SqlStore, "record_run_finished", refused)
    assert TriggerDaemon([_flow(entry)], store).run_once() == 0
    monkeypatch.undo()
    (request,) = _requests(store)
    (run,) = store.list_runs()
    assert request.status == "claimed" and request.run_id == run.header.run_id
    assert run.status == "running" and run.header.finished_at is None


def test_a_run_end_whose_acknowledgement_was_lost_still_finished_its_request_once(
    store: SqlStore, entry: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The end and the finish committed together; the daemon saw an error: no second run starts."""
    publish(store, "2024-01-01")
    original = SqlStore.record_run_finished

    def committed_then_lost(self: SqlStore, end: Any, progress: Any = ()) -> None:
        original(self, end, progress)
        raise StoreError(f"store {self.url}: cannot record the run's end: server closed the connection")

    monkeypatch.setattr(SqlStore, "record_run_finished", committed_then_lost)
    TriggerDaemon([_flow(entry)], store).run_once()
    monkeypatch.undo()
    (request,) = _requests(store)
    assert request.status == "finished"
    assert TriggerDaemon([_flow(entry)], store).run_once() == 0
    assert runs_per_key(store) == {"2024-01-01": 1}


def test_rerun_interrupted_must_be_a_whole_number() -> None:
    for bad in (-1, 1.5, True, "2"):
        with pytest.raises(DefinitionError, match="rerun_interrupted"):
            OnAssetEvents(["raw"], rerun_interrupted=bad)
        with pytest.raises(DefinitionError, match="rerun_interrupted"):
            CronPartitions("0 * * * *", start="2026-01-01T00:00", rerun_interrupted=bad)
