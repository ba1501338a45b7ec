"""The attempt-state contract behind ``partita status``: each key's newest failure, success and live run.

Driven through `RunHistory.key_attempts` / `failed_or_running_keys` / `unkeyed_attempts` and
`EventStore.last_unkeyed_success` on SQLite and PostgreSQL. A key is named
only by runs that recorded keys; a run is live as `get_run` judges it (a
dead owner's running attempt is not running).
"""

from __future__ import annotations

import datetime as dt

from partita.events.model import EventSource, SourceKind
from partita.results.record import AttemptRecord

from .conftest import NOW, dead_pid, draft, finish_run, keyed_plan_document, start_run

KEYS = ["a", "b", "c"]
PLAN = keyed_plan_document(KEYS)


def _attempt(index: int, key: str | None, status: str, finished: float | None, *, asset: str = "load") -> AttemptRecord:
    return AttemptRecord(
        asset, index, key is not None or asset == "load", status, partition_key=key,
        started_at=None if finished is None else finished - 1.0, finished_at=finished,
        duration=0.0 if finished is None else 1.0,
    )  # fmt: skip


def _run(history, run_id: str, attempts: list[AttemptRecord], *, status: str | None = "failed", **owner) -> None:
    start_run(history, run_id, NOW, plan=PLAN, record_partition_keys=True, **owner)
    history.record_progress(attempts, run_id, new=True)
    if status is not None:
        finish_run(history, run_id, status, NOW)


def test_each_key_gets_its_newest_outcome_across_runs(run_history):
    _run(run_history, "r1" * 16, [_attempt(0, "a", "success", 100.0), _attempt(1, "b", "failed", 100.0)])
    _run(run_history, "r2" * 16, [_attempt(0, "a", "failed", 200.0), _attempt(1, "b", "success", 210.0)])

    found = run_history.key_attempts("load")

    assert set(found) == {"a", "b"}
    assert (found["a"].outcome_run_id, found["a"].outcome_at, found["a"].failed) == ("r2" * 16, 200.0, True)
    assert (found["b"].outcome_run_id, found["b"].outcome_at, found["b"].failed) == ("r2" * 16, 210.0, False)
    assert found["a"].last_outcome.at == dt.datetime.fromtimestamp(200.0, dt.UTC)
    assert found["a"].running is None and found["a"].partition_key == "a"


def test_the_newest_outcome_is_by_finish_time_not_by_run_order(run_history):
    _run(run_history, "r1" * 16, [_attempt(0, "a", "failed", 300.0)])
    _run(run_history, "r2" * 16, [_attempt(0, "a", "success", 200.0)])

    assert run_history.key_attempts("load")["a"].failed is True


def test_skipped_and_cancelled_attempts_neither_fail_nor_clear_a_key(run_history):
    _run(run_history, "r1" * 16, [_attempt(0, "a", "failed", 100.0)])
    _run(run_history, "r2" * 16, [_attempt(0, "a", "skipped", 200.0), _attempt(1, "c", "cancelled", 200.0)])

    found = run_history.key_attempts("load")

    assert set(found) == {"a"}
    assert (found["a"].outcome_run_id, found["a"].failed) == ("r1" * 16, True)


def test_a_running_attempt_of_a_live_run_is_running_and_a_dead_owners_is_not(run_history):
    _run(run_history, "live" * 8, [_attempt(0, "a", "running", None)], status=None)
    _run(run_history, "dead" * 8, [_attempt(0, "b", "running", None)], status=None, pid=dead_pid())

    found = run_history.key_attempts("load")

    assert found["a"].running is not None and found["a"].running.run_id == "live" * 8
    assert "b" not in found  # interrupted: its attempt says nothing about the key now


def test_a_finished_runs_leftover_running_row_is_not_running(run_history):
    _run(run_history, "r1" * 16, [_attempt(0, "a", "running", None)], status="cancelled")

    assert run_history.key_attempts("load") == {}


def test_runs_that_did_not_record_keys_name_no_key(run_history):
    start_run(run_history, "r1" * 16, NOW, plan=PLAN, record_partition_keys=False)
    run_history.record_progress([_attempt(0, None, "failed", 100.0)], "r1" * 16, new=True)

    assert run_history.key_attempts("load") == {}


def test_other_assets_attempts_are_not_this_assets(run_history):
    _run(run_history, "r1" * 16, [_attempt(0, "a", "failed", 100.0, asset="publish")])

    assert run_history.key_attempts("load") == {}
    assert set(run_history.key_attempts("publish")) == {"a"}


def test_failed_or_running_keys_are_exactly_the_key_attempts_entries_that_failed_or_run(run_history):
    # a: failed then succeeded; b: succeeded then failed; c: failed, a skip after it; d: only succeeded;
    # e: failed twice, the newer counts; f: running in a live run; g: running under a dead owner.
    _run(run_history, "r1" * 16, [
        _attempt(0, "a", "failed", 100.0), _attempt(1, "b", "success", 100.0), _attempt(2, "c", "failed", 100.0),
        _attempt(3, "d", "success", 100.0), _attempt(4, "e", "failed", 100.0),
    ])  # fmt: skip
    _run(run_history, "r2" * 16, [
        _attempt(0, "a", "success", 200.0), _attempt(1, "b", "failed", 200.0), _attempt(2, "c", "skipped", 300.0),
        _attempt(3, "e", "failed", 250.0),
    ])  # fmt: skip
    _run(run_history, "live" * 8, [_attempt(0, "f", "running", None), _attempt(1, "b", "running", None)], status=None)
    _run(run_history, "dead" * 8, [_attempt(0, "g", "running", None)], status=None, pid=dead_pid())

    found = run_history.failed_or_running_keys("load")

    every = run_history.key_attempts("load")
    assert found == {key: entry for key, entry in every.items() if entry.failed or entry.running is not None}
    assert set(found) == {"b", "c", "e", "f"}
    assert (found["e"].outcome_run_id, found["e"].outcome_at, found["e"].failed) == ("r2" * 16, 250.0, True)
    assert found["b"].running is not None and found["b"].running.run_id == "live" * 8
    assert found["f"].failed is False and found["f"].last_outcome is None
    assert run_history.failed_or_running_keys("other") == {}


def test_an_unpartitioned_assets_newest_outcomes_and_live_run(run_history):
    _run(run_history, "r1" * 16, [_attempt(0, None, "success", 100.0, asset="report")])
    _run(run_history, "r2" * 16, [_attempt(0, None, "failed", 200.0, asset="report")])
    _run(run_history, "r3" * 16, [_attempt(0, None, "running", None, asset="report")], status=None)

    found = run_history.unkeyed_attempts("report")

    assert found.partition_key is None
    assert (found.outcome_run_id, found.outcome_at, found.failed) == ("r2" * 16, 200.0, True)
    assert found.running is not None and found.running.run_id == "r3" * 16
    empty = run_history.unkeyed_attempts("never_ran")
    assert (empty.last_outcome, empty.running) == (None, None)


def test_the_last_unkeyed_success_is_the_newest_unkeyed_outlet_event(event_store):
    when = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
    for number, key in enumerate([None, "k", None]):
        source = EventSource(SourceKind.OUTLET, f"run-{number}", "report", key is not None, 1)
        event_store.record_event(draft("report", key=key, source=source, timestamp=when + dt.timedelta(hours=number)))
    event_store.record_event(draft("report", dedupe_key="published"))  # published, not an outlet

    success = event_store.last_unkeyed_success("report")

    assert success is not None and success.partition_key is None
    assert (success.run_id, success.at) == ("run-2", when + dt.timedelta(hours=2))
    assert event_store.last_unkeyed_success("other") is None
