"""Triggers consume events in commit order (SPEC §12): no event is skipped because its id is smaller.

On PostgreSQL an event's id is assigned when its transaction inserts it and
the row appears when that transaction commits, so a higher id can be visible
before a lower one. A cursor that moved past the higher id used to skip the
lower one for good.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from partita.automation.evaluation import TriggerEvaluator
from partita.cli.automation import pending_document
from partita.entry import load_trigger_flows
from partita.store.sql import SqlStore

from .conftest import ENTRY, process, publish, runs_per_key, wait_for


@pytest.fixture
def pg_store(postgres_url: str) -> Iterator[SqlStore]:
    with contextlib.closing(SqlStore(postgres_url)) as store:
        yield store


@contextlib.contextmanager
def held_back_event(postgres_url: str, key: str) -> Iterator[psycopg.Connection[Any]]:
    """An event of ``raw`` inserted (so its id is taken) by a transaction that commits only when told to."""
    with psycopg.connect(postgres_url) as connection:
        connection.execute(
            "INSERT INTO partita_events (asset, partition_key, extra, timestamp, source_kind) "
            "VALUES ('raw', %s, '{}', %s, 'external')",
            (key, time.time()),
        )
        yield connection  # the test commits it; leaving the block rolls back what was not committed


def test_an_event_committed_after_a_higher_id_is_still_consumed(pg_store: SqlStore, postgres_url: str, entry: str):
    (flow,) = load_trigger_flows(entry)
    evaluator = TriggerEvaluator(flow, pg_store)
    with held_back_event(postgres_url, "2024-01-01") as held:
        publish(pg_store, "2024-01-02")  # a higher id, committed first
        process(evaluator)
        held.commit()
    process(evaluator)
    assert runs_per_key(pg_store) == {"2024-01-01": 1, "2024-01-02": 1}
    assert process(evaluator) == []


def test_plan_pending_shows_an_event_whose_commit_landed_late(pg_store: SqlStore, postgres_url: str, entry: str):
    (flow,) = load_trigger_flows(entry)
    with held_back_event(postgres_url, "2024-01-01") as held:
        publish(pg_store, "2024-01-02")
        process(TriggerEvaluator(flow, pg_store))
        held.commit()
    (document,) = pending_document(entry, postgres_url)["flows"]
    assert "2024-01-01" in document["would_start"]


def test_a_rolled_back_insert_does_not_hold_events_back(pg_store: SqlStore, postgres_url: str, entry: str):
    (flow,) = load_trigger_flows(entry)
    evaluator = TriggerEvaluator(flow, pg_store)
    with held_back_event(postgres_url, "2024-01-01") as held:
        publish(pg_store, "2024-01-02")
        held.rollback()
    process(evaluator)
    assert runs_per_key(pg_store) == {"2024-01-02": 1}


def test_a_long_transaction_delays_events_but_loses_none(pg_store: SqlStore, postgres_url: str, entry: str):
    (flow,) = load_trigger_flows(entry)
    evaluator = TriggerEvaluator(flow, pg_store)
    with psycopg.connect(postgres_url) as other:
        other.execute("SELECT pg_current_xact_id()")  # an unrelated writer's transaction, open
        publish(pg_store, "2024-01-03")
        assert process(evaluator) == []  # settled only once every older transaction ended
        other.commit()
    process(evaluator)
    assert runs_per_key(pg_store) == {"2024-01-03": 1}


def test_a_pass_reports_the_first_event_an_older_transaction_holds_back(
    pg_store: SqlStore, postgres_url: str, entry: str
):
    (flow,) = load_trigger_flows(entry)
    evaluator = TriggerEvaluator(flow, pg_store)
    with psycopg.connect(postgres_url) as other:
        other.execute("SELECT pg_current_xact_id()")  # an unrelated writer's transaction, open
        first, _ = publish(pg_store, "2024-01-04", "2024-01-05")
        report = evaluator.evaluate()
        assert (report.new_events, report.ready) == (0, {})
        assert report.held_back is not None and report.held_back.event_id == first
        other.commit()
    report = evaluator.evaluate()
    assert (report.new_events, report.held_back) == (2, None)


PRODUCERS = 4
#: Enough for the producers' commits to interleave with the daemon's reads many times over; the
#: 10,000-run figures are benchmarks/triggers.py's, not this test's.
KEYS_PER_PRODUCER = 300


def _consumer_runs_per_key(postgres_url: str) -> dict[str, int]:
    with psycopg.connect(postgres_url) as connection:
        rows = connection.execute(
            "SELECT partition_key, count(*) FROM partita_attempts WHERE asset = 'consumer' GROUP BY partition_key"
        ).fetchall()
    return {key: count for key, count in rows}


@pytest.mark.slow
def test_concurrent_producers_against_serve_start_exactly_one_run_per_key(postgres_url: str, tmp_path: Path):
    """4 producer threads × 300 keys each while ``partita serve`` consumes: every key exactly one run."""
    path = tmp_path / "stress.py"
    path.write_text(ENTRY)  # CONSUMER_DELAY unset: consumer bodies return at once
    first = dt.date(2000, 1, 1)
    keys = [(first + dt.timedelta(days=n)).isoformat() for n in range(PRODUCERS * KEYS_PER_PRODUCER)]
    SqlStore(postgres_url).close()  # migrated before the daemon and the producers start
    log = (tmp_path / "serve.log").open("w")  # a pipe nobody reads would fill up and stall the daemon
    daemon = subprocess.Popen(
        [sys.executable, "-m", "partita", "serve", str(path), "--store", postgres_url, "--max-in-flight", "4"],
        stdout=subprocess.DEVNULL,
        stderr=log,
        env={**os.environ, "PARTITA_STORE": postgres_url},
    )
    errors: list[BaseException] = []
    start = threading.Barrier(PRODUCERS)

    def produce(share: list[str]) -> None:
        try:
            with contextlib.closing(SqlStore(postgres_url)) as store:
                start.wait()
                publish(store, *share)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    began = time.monotonic()
    try:
        threads = [threading.Thread(target=produce, args=(keys[n::PRODUCERS],)) for n in range(PRODUCERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(300)
        assert errors == []
        produced = time.monotonic() - began
        wait_for(lambda: len(_consumer_runs_per_key(postgres_url)) >= len(keys), timeout=600, interval=0.5)
        consumed = time.monotonic() - began
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=120)
        log.close()
    assert daemon.returncode == 0, (tmp_path / "serve.log").read_text()[-2000:]
    counts = _consumer_runs_per_key(postgres_url)
    assert set(counts) == set(keys)
    assert set(counts.values()) == {1}
    print(f"\n{len(keys)} keys from {PRODUCERS} producers: produced in {produced:.1f} s, consumed in {consumed:.1f} s")
